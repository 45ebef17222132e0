"""The release x clause table of one draft, and its findings, on a rich Console.

Rows are the clauses (attention first), columns the checkpoint's declared value and then
each engine build. A cell is the value (`[1,2,3]` for taps, hidden_states indices), `*`
when the engine chose it itself (a default, the fallback formula, the tokenizer), `refused`
when the engine's code raised (the finding below gives its message), `?` when the audit
could not resolve it (the finding says why), `-` when not declared or not resolved.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from harness.audit.findings import ALL_CLAUSES, Column, Finding, short, signature
from harness.suite.draft_contract import Clause, show_value

if TYPE_CHECKING:
    from rich.console import Console

LEGEND = ("taps = target hidden_states[c] read (hidden_states[0] = embeddings, [c] = output "
          "of decoder layer c - 1; a checkpoint's target_layer_ids L is L + 1); * = chosen "
          "by the engine (default, fallback formula, tokenizer); ≠ = differs from the column "
          "to its left")


def declared_cell(clause: Clause | None) -> str:
    if clause is None:
        return "undeclared"
    if clause.value is None:
        return clause.note or "declared"
    return show_value(clause.value)


def render_clauses(declared: Mapping[str, Clause | None], columns: Sequence[Column],
                   found: Sequence[Finding], console: Console, title: str) -> None:
    from rich import box  # lazily: the command module must import fast
    from rich.table import Table
    from rich.text import Text

    console.print(title, markup=False, highlight=False)
    table = Table(box=box.SIMPLE_HEAD)
    table.add_column("clause", no_wrap=True)
    table.add_column("declared", no_wrap=True)
    for index, column in enumerate(columns):
        changed = index > 0 and column.engine == columns[index - 1].engine and any(
            signature(columns[index - 1], name) != signature(column, name)
            for name in ALL_CLAUSES)
        table.add_column(("≠ " if changed else "") + column.label, no_wrap=True,
                         style="bold yellow" if changed else None)
    rows = [[name, declared_cell(declared.get(name)), *(c.cell(name) for c in columns)]
            for name in ALL_CLAUSES]
    for row in rows:
        table.add_row(*(Text(cell) for cell in row))
    headings = ["clause", "declared", *(f"≠ {c.label}" for c in columns)]
    needed = sum(max(len(h), *(len(row[i]) for row in rows)) + 3
                 for i, h in enumerate(headings)) + 4
    console.width = max(console.width, needed)  # every cell whole: a cut value misleads
    console.print(table)
    console.print(LEGEND, markup=False)
    for column in columns:
        if column.refused is not None:
            console.print(f"{column.label}: refuses the draft: {short(column.refused)}",
                          markup=False)
        elif column.limit is not None:
            console.print(f"{column.label}: not resolved: {column.limit}", markup=False)
    for finding in found:
        console.print(f"{finding.kind}: {finding.text}", markup=False)
