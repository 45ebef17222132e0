"""`harness grid`'s per-cell speedup gate (`[grid] speedup_max_drop`) end to end on the CPU
reference engine: tiny_dflash_grid_cpu's pair on 2 tiers of GSM8K, 4 questions, with the
target alone after them (`[speedup]`). The long cell's TPOT and throughput speedups are
each paired by question against the short cell's (`harness.metrics.speedup.paired_speedup`)
and judged by the one judge beside the accept-length gate: the finding records both
figures with the reference's and the cell's speedups (the grid's own per-cell figures),
their ratio and its CI, and a status that is the judge's reading of the decision; the
finding's status is the worst of its gates; the heatmap and the printout name them."""

from __future__ import annotations

import math
import tomllib
from pathlib import Path

import pytest
import tomli_w

from harness.metrics.paired_gate import status_of
from harness.metrics.speedup import GATE_DEFINITION
from harness.results.grid import read_grid
from tests.protocols.grid_e2e import MARKS, run_grid
from tests.suite.test_grid_refuses_bad_input import SHIPPED
from tests.tiny_variants import PACED_ENGINE

pytestmark = MARKS

GRID: dict[str, object] = {
    "tiers": [{"name": "short", "shots": 0}, {"name": "long", "shots": 1}],
    "categories": ["gsm8k"], "questions": 4,
    "reference": {"tier": "short"}, "max_drop": 0.9, "speedup_max_drop": 0.5,
    "inconclusive": "pass",
}


def test_each_cells_speedups_are_gated_against_its_reference_cell(tmp_path: Path) -> None:
    suite = tmp_path / "tiny_grid_speedup.toml"
    document = tomllib.loads(SHIPPED.read_text(encoding="utf-8"))
    document["name"] = "tiny_grid_speedup"
    # paced forwards and answers long enough that a busy client still reads them in more
    # than one chunk: at 32 tokens a loaded CI read each short cell's answers whole, a
    # TPOT of 0, and the cell had no speedup
    document["engine"] |= PACED_ENGINE
    document["workload"] |= {"concurrency": 1, "max_tokens": 64}
    document["grid"] = GRID
    suite.write_text(tomli_w.dumps(document))
    out, folder = run_grid(suite, tmp_path / "results", exit_codes=(0, 1))
    grid = read_grid(folder)
    assert grid.gate is not None and grid.gate.speedup_max_drop == 0.5
    assert grid.gate.speedup_definition == GATE_DEFINITION
    cells = {cell.name: cell for cell in grid.cells}
    [finding] = grid.gate.findings
    assert (finding.cell, finding.reference) == ("long-gsm8k-c1", "short-gsm8k-c1")
    cell, reference = cells[finding.cell], cells[finding.reference]
    assert [gated["figure"] for gated in finding.speedup] == ["speedup_tpot",
                                                              "speedup_throughput"]
    statuses = []
    for gated, a, b in zip(finding.speedup,
                           (reference.speedup_tpot, reference.speedup_throughput),
                           (cell.speedup_tpot, cell.speedup_throughput), strict=True):
        assert a is not None and b is not None
        # every question paired: the gate's sides are the grid's own per-cell figures
        assert gated["n"] == 4
        assert float(gated["a"]) == pytest.approx(a, rel=1e-9)  # type: ignore[arg-type]
        assert float(gated["b"]) == pytest.approx(b, rel=1e-9)  # type: ignore[arg-type]
        assert float(gated["ratio"]) == pytest.approx(b / a, rel=1e-9)  # type: ignore[arg-type]
        ci = gated["ratio_ci"]
        assert isinstance(ci, list) and all(math.isfinite(float(v)) for v in ci)
        assert gated["max_drop"] == 0.5 and gated["definition"] == GATE_DEFINITION
        assert gated["status"] == status_of(str(gated["decision"]), "pass")
        statuses.append(gated["status"])
        assert f"speedup gate ({gated['figure']}) {str(gated['status']).upper()}" in out
    severity = ["pass", "fail", "error"]
    accept_status = status_of(str((finding.result or {})["decision"]), "pass")
    worst = max([accept_status, *statuses], key=severity.index)
    assert finding.status == worst
    assert "gate: speedups (TPOT, throughput) of each cell within 50.0%" in out
    assert (folder / "grid.png").stat().st_size > 10_000
