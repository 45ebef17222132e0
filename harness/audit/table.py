"""One table for many SGLang versions (or commits): rows = draft layers, columns = versions.

A cell is `causal/512` (sliding window in tokens, as the config states it; SGLang stores
it minus one), `causal` or `bidir` (full attention), `*` when the causality comes from a
default rather than an explicit `is_causal`, or `error [a]` when the version's own code
raised (the note `[a]` below the table gives its exception and message). A column whose
table differs from its left neighbour's is marked `≠` and listed under `changes`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from harness.audit.clause_table import render_clauses
from harness.audit.contract import LayerExpectation, check_contract
from harness.audit.evaluate import VersionResult
from harness.audit.findings import Finding, findings
from harness.suite.attention import LayerAttention
from harness.suite.draft_contract import Clause, ClauseValue, clause_differences

if TYPE_CHECKING:
    from rich.console import Console

JSON_SCHEMA_VERSION = 4  # 4: each version's `contract`, the report's `declared`, `findings`


def cell(layer: LayerAttention) -> str:
    word = "causal" if layer.causal else "bidir"
    text = word if layer.window is None else f"{word}/{layer.window}"
    return text if layer.explicit else f"{text}*"


def signature(result: VersionResult) -> tuple[object, ...]:
    """What two versions must share to count as the same table."""
    if result.error is not None:
        return ("error", result.error.type, result.error.message)
    return ("table", tuple(result.cells() or ()))


@dataclass(frozen=True)
class VersionsReport:
    config_origin: str
    results: list[VersionResult]
    expected: list[LayerExpectation] | None = None
    expected_origin: str | None = None
    differences: dict[str, list[str]] = field(default_factory=dict)
    # the other clauses: what the checkpoint declares, what each version resolves
    declared: dict[str, Clause | None] = field(default_factory=dict)
    expected_clauses: dict[str, ClauseValue] | None = None
    clause_diffs: dict[str, list[str]] = field(default_factory=dict)

    @property
    def rejected(self) -> list[VersionResult]:
        """Versions whose own code raised: on attention, or on any other clause."""
        return [result for result in self.results if result.error is not None
                or any(clause.error for clause in result.contract.values())]

    @property
    def findings(self) -> list[Finding]:
        return findings(self.declared, [result.column() for result in self.results])

    @property
    def verdict(self) -> str:
        if self.rejected:
            return "rejected"
        if self.expected is None and self.expected_clauses is None:
            return "nothing_expected"
        differs = any(self.differences.values()) or any(self.clause_diffs.values())
        return "differs" if differs else "as_expected"

    def changes(self) -> list[tuple[int, list[str]]]:
        """(column index, what changed) for each column that differs from its left neighbour."""
        found = []
        for index in range(1, len(self.results)):
            before, after = self.results[index - 1], self.results[index]
            if signature(before) != signature(after):
                found.append((index, describe_change(before, after)))
        return found

    def to_dict(self) -> dict[str, object]:
        return {
            "schema_version": JSON_SCHEMA_VERSION,
            "config": self.config_origin,
            "versions": [result.to_dict() for result in self.results],
            "changes": [{"from": self.results[i - 1].source.short,
                         "to": self.results[i].source.short, "what": what}
                        for i, what in self.changes()],
            "expected": self.expected,
            "expected_origin": self.expected_origin,
            "differences": self.differences,
            "declared": {name: None if clause is None else clause.to_dict()
                         for name, clause in self.declared.items()},
            "expected_contract": None if self.expected_clauses is None else {
                name: list(value) if isinstance(value, tuple) else value
                for name, value in self.expected_clauses.items()},
            "contract_differences": self.clause_diffs,
            "findings": [finding.to_dict() for finding in self.findings],
            "verdict": self.verdict,
        }


def _summary(result: VersionResult) -> str:
    if result.error is not None:
        return result.error.short
    return ", ".join(cell(layer) for layer in result.layers or [])


def describe_change(before: VersionResult, after: VersionResult) -> list[str]:
    if before.error is not None or after.error is not None:
        return [f"{_summary(before)} -> {_summary(after)}"]
    lines = []
    old, new = before.layers or [], after.layers or []
    for index in range(max(len(old), len(new))):
        a = cell(old[index]) if index < len(old) else "-"
        b = cell(new[index]) if index < len(new) else "-"
        if a.rstrip("*") != b.rstrip("*"):
            lines.append(f"layer {index}: {a} -> {b}")
    return lines or ["same layers, different default/explicit marks"]


def build_versions_report(
    config_origin: str,
    results: Sequence[VersionResult],
    expected: list[LayerExpectation] | None = None,
    expected_origin: str | None = None,
    declared: dict[str, Clause | None] | None = None,
    expected_clauses: dict[str, ClauseValue] | None = None,
) -> VersionsReport:
    differences: dict[str, list[str]] = {}
    if expected is not None:
        for result in results:
            if result.layers is not None:
                differences[result.source.short] = check_contract(expected, result.layers)
    clause_diffs: dict[str, list[str]] = {}
    if expected_clauses is not None:
        for result in results:
            clause_diffs[result.source.short] = clause_differences(
                expected_clauses, result.contract, result.source.label)
    return VersionsReport(config_origin, list(results), expected, expected_origin, differences,
                          dict(declared or {}), expected_clauses, clause_diffs)


def _notes(results: Sequence[VersionResult]) -> dict[tuple[str, str], str]:
    """One letter per distinct error, in column order."""
    letters: dict[tuple[str, str], str] = {}
    for result in results:
        if result.error is not None:
            key = (result.error.type, result.error.message)
            letters.setdefault(key, "abcdefghijklmnopqrstuvwxyz"[len(letters) % 26])
    return letters


def render_table(results: Sequence[VersionResult], console: Console, title: str,
                 headings: Mapping[int, str] | None = None) -> None:
    """The layers x versions table, its change marks and its error notes."""
    from rich import box  # lazily: the command module must import fast
    from rich.table import Table
    from rich.text import Text

    letters = _notes(results)
    changed = {index for index in range(1, len(results))
               if signature(results[index - 1]) != signature(results[index])}  # fmt: skip
    resolved = [r for r in results if r.layers is not None]
    rows = max((len(r.layers or []) for r in resolved), default=1)
    types = next((r.layers for r in resolved), None) or []
    console.print(title, markup=False, highlight=False)
    table = Table(box=box.SIMPLE_HEAD)
    table.add_column("layer", justify="right")
    table.add_column("type", no_wrap=True, min_width=7)
    for index, result in enumerate(results):
        heading = (headings or {}).get(index, result.source.short)
        mark = "≠ " if index in changed else ""
        table.add_column(f"{mark}{heading}", style="bold yellow" if index in changed else None,
                         no_wrap=True)
    for row in range(rows):
        layer_type = types[row].layer_type if row < len(types) else None
        cells = []
        for result in results:
            if result.error is not None:
                cells.append(f"error [{letters[(result.error.type, result.error.message)]}]")
            elif result.layers is not None and row < len(result.layers):
                cells.append(cell(result.layers[row]))
            else:
                cells.append("-")
        table.add_row(str(row) if resolved else "all",
                      (layer_type or "-").removesuffix("_attention"),
                      *(Text(text) for text in cells))
    console.print(table)
    console.print(
        "causal/N = causal, sliding window N tokens (SGLang stores N-1); bidir = "
        "bidirectional; * = from a default, not an explicit is_causal; ≠ = differs from the "
        "column to its left", markup=False)  # fmt: skip
    for (kind, message), letter in letters.items():
        same = [r for r in results
                if r.error is not None and (r.error.type, r.error.message) == (kind, message)]
        who = ", ".join(r.source.short for r in same)
        first = same[0]
        step = "building the config" if first.error and first.error.stage == "load" else "resolving"
        where = f", {first.error.where}" if first.error and first.error.where else ""
        assert first.error is not None
        console.print(f"[{letter}] {who}: {first.error.short} ({step}{where})", markup=False)


def render(report: VersionsReport, console: Console) -> None:
    """The table, what changed between neighbours, per-version notes and the expectation."""
    results = report.results
    render_table(results, console, f"DFlash draft attention: {report.config_origin}")
    changes = report.changes()
    if len(results) > 1:
        if not changes:
            console.print(f"no change across {len(results)} versions", markup=False)
        for index, changed in changes:
            console.print(f"changed {results[index - 1].source.short} -> "
                          f"{results[index].source.short}: " + "; ".join(changed), markup=False)
    letters = _notes(results)
    for result in results:
        behaves = ", ".join(result.behaves_as) or "none of the known behaviours"
        built = (f"config built by transformers {result.transformers} as "
                 f"{result.config_class} ({result.built_by})")  # fmt: skip
        if result.error is None:
            what = built
        else:
            letter = letters[(result.error.type, result.error.message)]
            what = (f"{built}; its resolver raises [{letter}]" if result.error.stage == "resolve"
                    else f"building the config raises [{letter}] (transformers "
                         f"{result.transformers})")  # fmt: skip
        console.print(f"{result.source.short}: {what}; behaves as {behaves}", markup=False)
    declared = {r.is_causal for r in results if r.error is None}
    if declared == {None}:
        console.print("is_causal: not declared: every * cell is a default the next SGLang "
                      "release may change; declare is_causal in the draft config to pin it",
                      markup=False)  # fmt: skip
    _render_expectation(report, console)
    if any(result.contract or result.contract_limit for result in results):
        console.print("")
        render_clauses(report.declared, [result.column() for result in results],
                       report.findings, console,
                       f"DFlash draft contract: {report.config_origin}")
        _render_clause_expectation(report, console)


def _render_clause_expectation(report: VersionsReport, console: Console) -> None:
    if report.expected_clauses is None:
        return
    for version, differences in report.clause_diffs.items():
        if differences:
            console.print(f"[red]differs[/] from {report.expected_origin}'s expected_contract "
                          f"under {version}:")
            for difference in differences:
                console.print(f"  {difference}", markup=False)
        else:
            console.print(f"[green]as expected[/] by {report.expected_origin}'s "
                          f"expected_contract under {version}")


def _render_expectation(report: VersionsReport, console: Console) -> None:
    if report.expected is None:
        return
    for version, differences in report.differences.items():
        if differences:
            console.print(f"[red]differs[/] from {report.expected_origin} under {version}:")
            for difference in differences:
                console.print(f"  {difference}", markup=False)
        else:
            console.print(f"[green]as expected[/] by {report.expected_origin} under {version}")
