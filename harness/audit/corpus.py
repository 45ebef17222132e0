"""`harness audit --corpus DIR`: every draft of a corpus, under every engine build asked for.

A corpus is a folder of folders, one per draft: its `config.json` and, optionally, its
target's folder `target/` (a `config.json`, and a tokenizer when there is one). Loading it
is the harness's own business and is strict: a file that is not UTF-8 JSON, a contract
field of the wrong type or an absurd value is bad input (exit 2) naming the file and the
field, never a traceback (validate_draft_config; fuzzed in tests/audit/test_corpus_fuzz.py).
What each engine then does with a well-formed draft is the engines' own code's answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from harness.audit.clause_table import render_clauses
from harness.audit.evaluate import evaluate_many
from harness.audit.findings import ALL_CLAUSES, Column, Finding, findings, flagged, signature
from harness.audit.source import SGLangSource
from harness.audit.target import AuditTarget, read_target
from harness.suite.attention import DraftConfigError
from harness.suite.document import DocumentError, load_json
from harness.suite.draft_contract import Clause, declared_contract

if TYPE_CHECKING:
    from rich.console import Console

CONFIG = "config.json"
TARGET = "target"
MAX_CONFIG_BYTES = 1 << 20  # a draft config is a few kilobytes


@dataclass(frozen=True)
class CorpusDraft:
    name: str
    config_file: Path
    config: dict[str, object]
    declared: dict[str, Clause | None]
    target: AuditTarget | None = None


@dataclass(frozen=True)
class DraftAudit:
    """One draft's columns (one per engine build) and what they show."""

    draft: CorpusDraft
    columns: list[Column]
    found: list[Finding] = field(default_factory=list)

    @property
    def flags(self) -> list[Finding]:
        return flagged(self.found)

    def to_dict(self) -> dict[str, object]:
        return {
            "draft": self.draft.name,
            "config": str(self.draft.config_file),
            "target": None if self.draft.target is None else str(self.draft.target.folder),
            "declared": {name: None if clause is None else clause.to_dict()
                         for name, clause in self.draft.declared.items()},
            "columns": [{"label": c.label, "engine": c.engine, "refused": c.refused,
                         "limit": c.limit,
                         "clauses": {name: clause.to_dict()
                                     for name, clause in c.clauses.items()}}
                        for c in self.columns],
            "findings": [finding.to_dict() for finding in self.found],
            "flags": [finding.to_dict() for finding in self.flags],
        }


def parse_json_bytes(data: bytes, where: str) -> object:
    """JSON from bytes, read by the project's one JSON reader (harness.suite.document): not
    UTF-8, not JSON, nested too deep, a number that is not finite is bad input."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise DraftConfigError(f"{where}: not UTF-8 text ({error.reason} at byte "
                               f"{error.start})") from None
    try:
        return load_json(text)
    except DocumentError as error:
        raise DraftConfigError(f"{where}: {error}") from None


def _read(path: Path) -> bytes:
    try:
        if path.stat().st_size > MAX_CONFIG_BYTES:
            raise DraftConfigError(f"{path}: {path.stat().st_size} bytes; a draft config is "
                                   f"at most {MAX_CONFIG_BYTES} bytes")
        return path.read_bytes()
    except OSError as error:
        raise DraftConfigError(f"{path}: cannot read: {error}") from None


def load_draft(folder: Path) -> CorpusDraft:
    """One corpus entry, validated: the draft's contract fields and its target's facts."""
    file = folder / CONFIG
    config = parse_json_bytes(_read(file), str(file))
    if not isinstance(config, dict):  # as declared_contract words it
        raise DraftConfigError(f"{file}: draft config must be a JSON object, got "
                               f"{type(config).__name__}")
    try:
        declared = declared_contract(config)
    except DraftConfigError as error:
        raise DraftConfigError(f"{file}: {error.message}") from None
    target = None
    target_dir = folder / TARGET
    if target_dir.is_dir():
        target_file = target_dir / CONFIG
        if not target_file.is_file():
            raise DraftConfigError(f"{target_dir}: a target folder needs a {CONFIG}")
        target = read_target(parse_json_bytes(_read(target_file), str(target_file)),
                             target_dir, str(target_file))
    return CorpusDraft(folder.name, file, config, declared, target)


def load_corpus(folder: str | Path) -> list[CorpusDraft]:
    """Every draft folder of a corpus (a folder holding a config.json), sorted by name."""
    root = Path(folder).expanduser()
    if not root.is_dir():
        raise DraftConfigError(f"--corpus {folder}: no such folder")
    entries = sorted(p for p in root.iterdir() if p.is_dir() and (p / CONFIG).is_file())
    if not entries:
        raise DraftConfigError(f"--corpus {folder}: no draft folder (a folder holding "
                               f"{CONFIG}) in it")
    return [load_draft(entry) for entry in entries]


def audit_corpus(drafts: Sequence[CorpusDraft], columns: Sequence[Sequence[Column]]
                 ) -> list[DraftAudit]:
    """Each draft with its columns (columns[i]: draft i's, one per engine build)."""
    return [DraftAudit(draft, list(cols), findings(draft.declared, cols))
            for draft, cols in zip(drafts, columns, strict=True)]


def sglang_columns(drafts: Sequence[CorpusDraft], sources: Sequence[SGLangSource],
                   transformers: str | None = None, use_cache: bool = True
                   ) -> list[list[Column]]:
    """Each draft's SGLang columns, every version in one batch (one worker per pin)."""
    results = evaluate_many([d.config_file for d in drafts], sources, transformers,
                            use_cache, [d.target for d in drafts])
    return [[result.column() for result in row] for row in results]


def render(audits: Sequence[DraftAudit], console: Console, details: bool = True) -> None:
    """Draft x engine (one row per draft: each build's verdict on it), then, for each draft
    with a flag, its release x clause table and findings."""
    from rich import box
    from rich.table import Table

    if not audits:
        return
    labels = [c.label for c in audits[0].columns]
    table = Table(box=box.SIMPLE_HEAD, title="DFlash drafts x engine builds",
                  title_justify="left")
    table.add_column("draft", no_wrap=True)
    for label in labels:
        table.add_column(label, no_wrap=True)
    table.add_column("flags", justify="right")
    rows = [[audit.draft.name, *(_summary(audit, c) for c in audit.columns),
             str(len(audit.flags))] for audit in audits]
    for row in rows:
        table.add_row(*row)
    headings = ["draft", *labels, "flags"]
    width = sum(max(len(h), *(len(row[i]) for row in rows)) + 3
                for i, h in enumerate(headings)) + 4
    console.width = max(console.width, width)  # every cell whole
    console.print(table)
    console.print("ok = every clause resolved as the checkpoint declares it; ≠ CLAUSE = "
                  "resolved otherwise than declared; refused = the engine's code raises on "
                  "the draft; ? = not resolved by the audit (no target, or a stand-in the "
                  "code outgrew); * N = N clauses left to the engine's default",
                  markup=False)
    flagged_drafts = [a for a in audits if a.flags]
    console.print(f"{len(audits)} drafts, {len(flagged_drafts)} with a flagged clause "
                  "(differs between releases, between engines, or from the checkpoint)",
                  markup=False)
    for audit in flagged_drafts:
        console.print("")
        if details:
            render_clauses(audit.draft.declared, audit.columns, audit.flags, console,
                           f"{audit.draft.name}: {audit.draft.config_file}")
        else:
            console.print(f"{audit.draft.name}:", markup=False)
            for finding in audit.flags:
                console.print(f"  {finding.kind}: {finding.text}", markup=False)


def _summary(audit: DraftAudit, column: Column) -> str:
    if column.refused is not None:
        return "refused"
    if column.limit is not None:
        return "?"
    parts = []
    refused = [n for n in ALL_CLAUSES if signature(column, n)[0] == "error"]
    if refused:
        parts.append("refuses " + ",".join(refused))
    differs = [n for n in ALL_CLAUSES
               if (want := audit.draft.declared.get(n)) is not None and want.value is not None
               and signature(column, n)[0] == "value"
               and (got := column.clause(n)) is not None and got.value != want.value]
    if differs:
        parts.append("≠ " + ",".join(differs))
    unknown = [n for n in ALL_CLAUSES if signature(column, n)[0] in ("limit", "none")]
    if unknown:
        parts.append(f"? {len(unknown)}")
    defaults = [n for n in ALL_CLAUSES if audit.draft.declared.get(n) is None]
    if defaults:
        parts.append(f"* {len(defaults)}")
    return "; ".join(parts) or "ok"
