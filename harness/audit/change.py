"""A change to the engine, judged before a GPU: every draft whose resolved contract it alters.

Given two SGLang trees (two releases, two commits of a checkout, a checkout, or any of
them plus a patch: `0.5.23+pr.diff`), both are evaluated on every draft in one batch (each
tree's own code on the config object it builds, as any audit), and each draft's clauses
are compared, field by field: a value that changes, a clause (or the whole draft) one side
refuses and the other resolves. A draft the change leaves as it was is not listed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from harness.audit.findings import ALL_CLAUSES, Column, said, signature

if TYPE_CHECKING:
    from rich.console import Console


@dataclass(frozen=True)
class ClauseChange:
    clause: str  # a clause name, or "draft" when one side refuses the whole draft
    before: str
    after: str

    def to_dict(self) -> dict[str, str]:
        return {"clause": self.clause, "before": self.before, "after": self.after}


@dataclass(frozen=True)
class DraftChange:
    draft: str
    changes: list[ClauseChange]

    @property
    def refuses(self) -> bool:
        """The change makes the engine refuse the draft (or a clause of it)."""
        return any(c.after.startswith(("refuses", "refused")) and
                   not c.before.startswith(("refuses", "refused")) for c in self.changes)

    def to_dict(self) -> dict[str, object]:
        return {"draft": self.draft, "refused_after": self.refuses,
                "changes": [c.to_dict() for c in self.changes]}


def compare(before: Column, after: Column) -> list[ClauseChange]:
    """The clauses whose resolution differs between two columns of one draft."""
    if (before.refused is None) != (after.refused is None):
        return [ClauseChange("draft",
                             f"refuses the draft ({before.refused})" if before.refused
                             else "loads it",
                             f"refuses the draft ({after.refused})" if after.refused
                             else "loads it")]
    return [ClauseChange(name, said(before, name), said(after, name))
            for name in ALL_CLAUSES if signature(before, name) != signature(after, name)]


def judge_change(names: Sequence[str], columns: Sequence[Sequence[Column]]) -> list[DraftChange]:
    """Each draft (columns[i] = [before, after]) whose contract the change alters."""
    changed = []
    for name, (before, after) in zip(names, columns, strict=True):
        found = compare(before, after)
        if found:
            changed.append(DraftChange(name, found))
    return changed


def render(changed: Sequence[DraftChange], total: int, before: str, after: str,
           console: Console) -> None:
    console.print(f"change {before} -> {after}: {len(changed)} of {total} drafts resolve "
                  "differently", markup=False)
    refused = [c.draft for c in changed if c.refuses]
    if refused:
        console.print(f"refused after the change: {', '.join(refused)}", markup=False)
    for draft in changed:
        console.print(f"{draft.draft}:", markup=False)
        for change in draft.changes:
            console.print(f"  {change.clause}: {change.before} -> {change.after}",
                          markup=False)
