"""`harness grid` end to end on SGLang 0.5.23's own DFLASH worker on CPU
(`nox -s sglang_dflash_cpu`): the shipped tiny_dflash_grid_sglang_cpu cut to its smallest
grid, one cell (tier short, GSM8K, prefix caching off, 2 questions) and the target alone
after it, so one speculative launch and one target-alone launch. SGLang's own flag
(`--disable-radix-cache`) reaches both launch lines, and the grid's record holds the
cell's accept length in SGLang's server definition and both speedups over the target
alone, each finite, with its CI and definition, the same figures as the cell's run."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import tomli_w

from harness.results.grid import read_grid
from harness.results.readers import read_run
from tests.sglang_dflash_cpu.conftest import REPO, SPEC

pytestmark = pytest.mark.slow

SHIPPED = REPO / "suites" / "tiny_dflash_grid_sglang_cpu.toml"
GRID = {"tiers": [{"name": "short", "shots": 0}], "categories": ["gsm8k"],
        "prefix_caching": ["off"], "questions": 2}


def test_a_one_cell_grid_on_real_sglang(sglang_cpu: object, tmp_path: Path) -> None:
    head = SHIPPED.read_text(encoding="utf-8").split("\n[grid]", 1)[0]
    suite = tmp_path / "tiny_grid_sglang.toml"
    suite.write_text(head.replace('name = "tiny_dflash_grid_sglang_cpu"',
                                  'name = "tiny_grid_sglang"')
                     + "\n" + tomli_w.dumps({"grid": GRID}))
    results = tmp_path / "results"
    done = subprocess.run(
        [sys.executable, "-m", "harness", "grid", str(suite), "--sglang", SPEC, "--results",
         str(results), "--no-progress"], cwd=REPO, capture_output=True, text=True,
        timeout=2400, env={**os.environ, "HARNESS_SGLANG_DEVICE": "cpu"}, check=False)
    output = done.stdout[-4000:] + done.stderr[-6000:]
    assert done.returncode == 0, output
    assert "Traceback" not in done.stderr

    [folder] = [p.parent for p in (results / "grids" / "tiny_grid_sglang").glob("*/grid.json")]
    grid = read_grid(folder)
    assert grid.engine == "sglang" and grid.status == "pass" and grid.metric == "server_avg"
    [launch] = grid.launches
    assert launch.prefix_caching == "off" and launch.flags == ["--disable-radix-cache"]
    [cell] = grid.cells
    assert cell.name == "short-gsm8k-pcoff-c1" and cell.n_prompts == 2
    assert cell.run_dir is not None
    run = read_run(results / cell.run_dir)
    assert run.launch is not None and "--disable-radix-cache" in run.launch.command
    measurement = run.measurement
    assert measurement is not None and measurement.speedup is not None
    for value, ci in ((cell.accept_length, cell.accept_length_ci),
                      (cell.speedup_tpot, cell.speedup_tpot_ci),
                      (cell.speedup_throughput, cell.speedup_throughput_ci)):
        assert value is not None and math.isfinite(value) and value > 0, output
        assert ci is not None and all(math.isfinite(v) for v in ci)
    assert cell.accept_length is not None and cell.accept_length >= 1.0
    assert cell.accept_length == measurement.accept_length  # copied, never recomputed
    assert cell.speedup_tpot == measurement.speedup.tpot
    assert set(grid.speedup_definitions) >= {"speedup_tpot", "speedup_throughput"}
    assert (folder / "grid.png").stat().st_size > 10_000
