"""`[grid]`: the workload grid (`harness grid SUITE`, docs/speed.md "Workload grid").

    [grid]
    tiers = [{ name = "short", shots = 0 }, { name = "long", shots = 2 }]
    categories = ["gsm8k", "qa"]        # Spec-Bench's tasks or MT-Bench categories,
                                        # "gsm8k", "humaneval"
    prefix_caching = ["on", "off"]      # optional: the engine's own launch flag, one launch each
    concurrency = [1, 4]                # optional: the concurrency sweep's points
    questions = 4                       # prompts per cell
    reference = { tier = "short", prefix_caching = "on", concurrency = 1 }
    max_drop = 0.1                      # each cell's accept length within 10% of its reference's
    speedup_max_drop = 0.2              # optional, with [speedup]: each cell's speedups within
                                        # 20% of its reference cell's

A cell is one tier, one category, one prefix-caching setting and one concurrency. A tier
is a prompt length made from the data there is: `shots` GSM8K worked examples (the train
split's first lines, `Question: ...\\nAnswer: ...`) before each prompt: for GSM8K that is
its own few-shot prefix (`shots_from = "train"`, so every tier asks the same test
questions), for the others a prefixed context before the first turn (`context_shots`).
Each cell is a workload entry of a derived suite (`harness.protocols.grid`), judged by
the suite's `[floors]` (accept length, metric, speedup floors); cells of one launch share
one server. The gate compares each cell with the reference cell of its own category: cells
of two categories share no prompt, so only a category's cells pair by question. With
`speedup_max_drop` it also compares each cell's speedups over the target alone (TPOT and
throughput, `harness.metrics.speedup`) with its reference cell's, paired by question.

Bad input is refused at load naming the field: an unknown category, a repeated axis
value, a reference that names no cell, a concurrency past the questions, prefix caching
on an engine that has no prefix cache (the reference engine: every request prefills its
whole prompt into a fresh cache, `reference_engine/decoding.py`), or a prefix
flag already among `engine.extra_args`. What only the data can say (a category's rows, the
worked examples a tier needs) is checked by `harness validate` before any run
(`harness.workloads.grid_data`).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Literal

from pydantic import Field, model_validator

from harness.suite.entries import (
    MT_BENCH_CATEGORIES,
    NAME_PATTERN,
    SPEC_BENCH_TASKS,
    impossible,
)
from harness.suite.prefix_caching import prefix_cache_for
from harness.suite.serving import Strict

MAX_SHOTS = 8  # as GSM8K's own `shots` (harness.suite.entries.GSM8KWorkload)
MAX_CELLS = 256  # one launch per prefix-caching setting measures them all: keep a grid a grid
GRID_CATEGORIES = ("gsm8k", "humaneval", *SPEC_BENCH_TASKS, *MT_BENCH_CATEGORIES)
PrefixCaching = Literal["on", "off"]



class GridTier(Strict):
    """One prompt-length tier: `shots` GSM8K worked examples before each prompt."""

    name: str = Field(pattern=NAME_PATTERN)
    shots: int = Field(ge=0, le=MAX_SHOTS)

    @property
    def label(self) -> str:
        """The tier as the record and the plot state it."""
        return f"{self.name}: {self.shots} GSM8K train worked example(s) prefixed"


class GridReference(Strict):
    """The reference cell's coordinates; its category is each cell's own."""

    tier: str
    prefix_caching: PrefixCaching | None = None  # required when the grid sweeps it
    concurrency: int | None = Field(default=None, ge=1)  # required when the grid sweeps it


class Grid(Strict):
    tiers: list[GridTier] = Field(min_length=1)
    categories: list[str] = Field(min_length=1)
    prefix_caching: list[PrefixCaching] = Field(default_factory=list)  # empty: not swept
    concurrency: list[int] = Field(default_factory=list)  # empty: the workload's own
    questions: int = Field(ge=1, le=1319)
    reference: GridReference | None = None
    max_drop: float | None = Field(default=None, gt=0.0, lt=1.0, allow_inf_nan=False)
    # the per-cell speedup gate: each speedup over the target alone within this share of
    # its reference cell's (paired by question, harness.metrics.speedup.paired_speedup);
    # needs `reference` and the suite's [speedup] (harness.suite.schema)
    speedup_max_drop: float | None = Field(default=None, gt=0.0, lt=1.0, allow_inf_nan=False)
    alpha: float = Field(default=0.05, gt=0.0, lt=0.5)
    inconclusive: Literal["pass", "fail"] = "pass"

    @model_validator(mode="after")
    def _axes(self) -> Grid:
        unknown = [c for c in self.categories if c not in GRID_CATEGORIES]
        if unknown:
            raise impossible("categories", f"unknown {unknown}; known: gsm8k, humaneval, "
                             f"Spec-Bench's tasks {', '.join(SPEC_BENCH_TASKS)} and MT-Bench's "
                             f"categories {', '.join(MT_BENCH_CATEGORIES)}")
        axes: list[tuple[str, list[str]]] = [
            ("tiers", [t.name for t in self.tiers]), ("categories", list(self.categories)),
            ("prefix_caching", list(self.prefix_caching)),
            ("concurrency", [str(c) for c in self.concurrency])]
        for name, values in axes:
            repeated = sorted({v for v in values if values.count(v) > 1})
            if repeated:
                raise impossible(name, f"{', '.join(repeated)} given twice; each value is "
                                 "one row of cells")
        if any(c < 1 for c in self.concurrency):
            raise impossible("concurrency", "a cell needs at least 1 request in flight")
        beyond = [c for c in self.concurrency if c > self.questions]
        if beyond:
            raise impossible("concurrency", f"{beyond[0]} is more than the {self.questions} "
                             "questions of a cell; no cell can keep that many in flight")
        count = (len(self.tiers) * len(self.categories) * max(len(self.prefix_caching), 1)
                 * max(len(self.concurrency), 1))
        if count > MAX_CELLS:
            raise impossible("(cells)", f"{count} cells: a grid holds at most {MAX_CELLS}")
        return self

    @model_validator(mode="after")
    def _reference_names_a_cell(self) -> Grid:
        if (self.max_drop is None) != (self.reference is None):
            raise impossible("max_drop", "max_drop and reference go together: the gate "
                             "judges each cell against its reference cell within max_drop")
        if self.speedup_max_drop is not None and self.reference is None:
            raise impossible("speedup_max_drop", "the speedup gate judges each cell against "
                             "its reference cell: name grid.reference and grid.max_drop")
        ref = self.reference
        if ref is None:
            return self
        tiers = [t.name for t in self.tiers]
        if ref.tier not in tiers:
            raise impossible("reference.tier", f"{ref.tier!r} is not a tier of the grid "
                             f"({', '.join(tiers)})")
        for name, value, axis in (("prefix_caching", ref.prefix_caching, self.prefix_caching),
                                  ("concurrency", ref.concurrency, self.concurrency)):
            if axis and value is None:
                raise impossible(f"reference.{name}", f"the grid sweeps {name} "
                                 f"({', '.join(map(str, axis))}); name the reference's")
            if value is not None and value not in axis:
                raise impossible(f"reference.{name}", f"{value!r} is not a value of grid."
                                 f"{name} ({', '.join(map(str, axis)) or 'not swept'})")
        return self


@dataclass(frozen=True)
class GridCell:
    """One cell: its coordinates and the workload entry (series `<suite>.<name>`)."""

    tier: GridTier
    category: str
    prefix_caching: PrefixCaching | None
    concurrency: int

    @property
    def name(self) -> str:
        cache = "" if self.prefix_caching is None else f"-pc{self.prefix_caching}"
        return f"{self.tier.name}-{self.category}{cache}-c{self.concurrency}"


def grid_cells(grid: Grid, workload_concurrency: int) -> list[GridCell]:
    """Every cell, in axis order (tier, category, prefix caching, concurrency)."""
    caching: list[PrefixCaching | None] = list(grid.prefix_caching) or [None]
    return [GridCell(tier, category, cache, concurrency)
            for tier, category, cache, concurrency in itertools.product(
                grid.tiers, grid.categories, caching,
                grid.concurrency or [workload_concurrency])]


def reference_cell(grid: Grid, cell: GridCell, workload_concurrency: int) -> GridCell | None:
    """The cell `cell` is judged against: the reference's coordinates in its category."""
    ref = grid.reference
    if ref is None:
        return None
    tier = next(t for t in grid.tiers if t.name == ref.tier)
    return GridCell(tier, cell.category, ref.prefix_caching,
                    ref.concurrency if ref.concurrency is not None else workload_concurrency)


def engine_problem(grid: Grid, kind: str, extra_args: list[str]) -> tuple[str, str] | None:
    """(field, why) when the engine cannot take the grid's prefix-caching axis."""
    if not grid.prefix_caching:
        return None
    # each engine's own flags (harness.suite.prefix_caching), added to its launch line
    cache = prefix_cache_for(kind)
    if not cache.present:
        return "grid.prefix_caching", (f"{cache.source}: there is nothing to turn on or "
                                       "off; remove grid.prefix_caching")
    own = {*cache.on, *cache.off}
    taken = [arg for arg in extra_args if arg.split("=", 1)[0] in own]
    if taken:
        return ("engine.extra_args", f"{taken[0]} is set by grid.prefix_caching on each "
                                     "launch; remove it from engine.extra_args")
    return None
