"""`harness grid` end to end on the CPU reference engine: 2 tiers x 2 categories, 4
questions each, on one launch (the reference engine has no prefix cache, so no second
one): one normal run record per cell, the grid's record with each cell's accept length in
its definition (the same figure as the cell's run record), its heatmap, and the gate
against each category's reference cell. The tiny target was trained on 128-token windows:
one prefixed worked example lowers its drafts' acceptance (greedy, the same figures on
every run), so at a 5% tolerance with inconclusive judged fail the long tier fails the
gate in both categories: exit 1, naming the cells."""

from __future__ import annotations

from pathlib import Path

import tomli_w

from harness.results.grid import read_grid
from harness.results.readers import read_requests, read_run
from tests.protocols.grid_e2e import MARKS, run_grid
from tests.suite.test_grid_refuses_bad_input import SHIPPED

pytestmark = MARKS

GRID: dict[str, object] = {
    "tiers": [{"name": "short", "shots": 0}, {"name": "long", "shots": 1}],
    "categories": ["gsm8k", "qa"], "questions": 4,
    "reference": {"tier": "short"}, "max_drop": 0.05, "inconclusive": "fail",
}


def test_a_two_by_two_grid(tmp_path: Path) -> None:
    suite = tmp_path / "tiny_grid.toml"
    shipped = SHIPPED.read_text(encoding="utf-8")
    head = shipped.split("\n[speedup]", 1)[0]  # no target alone: one launch in all
    head = head.replace('name = "tiny_dflash_grid_cpu"', 'name = "tiny_grid"')
    suite.write_text(head.replace("concurrency = 2", "concurrency = 1") + "\n"
                     + tomli_w.dumps({"grid": GRID}))
    results = tmp_path / "results"
    out, folder = run_grid(suite, results, exit_codes=(1,))
    grid = read_grid(folder)
    assert [c.name for c in grid.cells] == ["short-gsm8k-c1", "short-qa-c1", "long-gsm8k-c1",
                                            "long-qa-c1"]
    assert grid.metric == "server_avg" and "verify step" in grid.definition
    assert [t.label for t in grid.tiers] == ["short: 0 GSM8K train worked example(s) prefixed",
                                             "long: 1 GSM8K train worked example(s) prefixed"]
    [launch] = grid.launches  # every cell on one server
    assert launch.cells == [c.name for c in grid.cells] and launch.flags == []
    launches = set()
    for cell in grid.cells:
        record = read_run(results / str(cell.run_dir))
        assert record.suite.name == f"tiny_grid.{cell.name}"
        assert record.measurement is not None
        assert cell.accept_length == record.measurement.accept_length
        assert cell.accept_length_ci == record.measurement.accept_length_ci
        assert len(read_requests(results / str(cell.run_dir), record, strict=True)) == 4
        launches.add(record.launch.command[-1] if record.launch else None)
        line = next(line for line in out.splitlines() if line.startswith(f"cell {cell.name}:"))
        assert f"accept length (server_avg) {cell.accept_length:.4f}" in line
    assert len(launches) == 1

    # the gate: each long cell against the short cell of its own category
    assert grid.gate is not None
    found = {(f.cell, f.reference): f.status for f in grid.gate.findings}
    assert found == {("long-gsm8k-c1", "short-gsm8k-c1"): "fail",
                     ("long-qa-c1", "short-qa-c1"): "fail"}
    assert "cell long-qa-c1 against short-qa-c1: relative gate FAIL" in out
    assert grid.status == "fail" and "grid: FAIL" in out
    assert (folder / "grid.png").is_file() and f"plot:   {folder / 'grid.png'}" in out
