"""A grid's record through the door: written and read back as the same record, its
heatmap drawn with a cell that has no figure shown as such (never a zero), each speedup
panel titled with its definition and showing that figure's own speedup gate, and a
damaged or hostile grid.json refused naming the file and the field (exit 2)."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from harness.analysis.grid_plot import grid_figure, plot_grid, row_label
from harness.results import grid as grid_record
from harness.results.grid import (
    GRID_FILE,
    GRIDS,
    GridCellRecord,
    GridFinding,
    GridGate,
    GridRecord,
    GridTierInfo,
    read_grid,
)
from harness.results.readers import BadRecord
from harness.suite.entries import METRIC_DEFINITIONS

ROOT = Path(__file__).resolve().parents[2]


def cell(name: str, tier: str, category: str, accept: float | None,
         tpot: float | None = 1.2) -> GridCellRecord:
    return GridCellRecord(
        name=name, tier=tier, category=category, concurrency=1, launch=0,
        series=f"s.{name}", run_id="r" + name, run_dir=f"runs/s.{name}/x",
        status="pass" if accept is not None else "error",
        reasons=[] if accept is not None else ["no record: the cell never ran"],
        accept_length=accept, accept_length_ci=(accept - 0.1, accept + 0.1) if accept else None,
        n_prompts=4 if accept else None, speedup_tpot=tpot if accept else None,
        speedup_tpot_ci=(tpot - 0.1, tpot + 0.1) if accept and tpot else None,
        reference=None if tier == "short" else f"short-{category}-c1")


def record() -> GridRecord:
    cells = [cell("short-gsm8k-c1", "short", "gsm8k", 4.2),
             cell("short-qa-c1", "short", "qa", 3.9, 0.7),
             cell("long-gsm8k-c1", "long", "gsm8k", 3.3),
             cell("long-qa-c1", "long", "qa", None)]
    return GridRecord(
        grid_id="g1", suite="s", engine="reference", started_at=datetime(2026, 1, 1, tzinfo=UTC),
        metric="server_avg", definition=METRIC_DEFINITIONS["server_avg"],
        speedup_definitions={"speedup_tpot": "target alone's mean TPOT / speculation's"},
        tiers=[GridTierInfo(name="short", shots=0, label="short: 0 prefixed"),
               GridTierInfo(name="long", shots=1, label="long: 1 prefixed")],
        categories=["gsm8k", "qa"], concurrency=[1], questions=4,
        launches=[grid_record.GridLaunch(cells=[c.name for c in cells], status="error")],
        cells=cells,
        gate=GridGate(reference={"tier": "short", "prefix_caching": None, "concurrency": 1},
                      max_drop=0.1, speedup_max_drop=0.2, speedup_definition="B / A",
                      alpha=0.05, inconclusive="pass",
                      findings=[GridFinding(cell="long-gsm8k-c1", reference="short-gsm8k-c1",
                                            status="fail", reasons=["relative gate FAIL"],
                                            speedup=[{"figure": "speedup_tpot",
                                                      "status": "pass", "ratio": 1.0},
                                                     {"figure": "speedup_throughput",
                                                      "status": "error",
                                                      "reason": "no test"}])]),
        status="error")


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    made = GRIDS.new_folder(tmp_path, "s", datetime(2026, 1, 1, tzinfo=UTC), "g1")
    GRIDS.write(made, record(), tmp_path)
    return made


def test_written_and_read_back_alike(folder: Path) -> None:
    assert read_grid(folder) == record()
    assert read_grid(folder / GRID_FILE) == record()


def test_the_heatmap_states_every_figure_and_the_missing_one(folder: Path) -> None:
    grid = read_grid(folder)
    figure = grid_figure(grid)
    accept, speedup = [axes for axes in figure.axes if axes.get_label() != "<colorbar>"]
    texts = [t.get_text() for t in accept.texts]
    assert "4.20\n[4.10, 4.30]\nPASS" in texts
    assert "3.30\n[3.20, 3.40]\nFAIL" in texts  # the gate's finding, not the run's pass
    assert "no figure\nERROR" in texts  # the cell with no record: never a zero
    assert "server_avg definition" in accept.get_title()
    assert "speedup_tpot definition" in speedup.get_title()
    assert "target alone's mean TPOT / speculation's" in speedup.get_title()
    assert "speedup gate, within 20% of the reference cell's" in speedup.get_title()
    # the speedup panel's verdict is the TPOT speedup gate's (pass), not the finding's fail
    shown = [t.get_text() for t in speedup.texts]
    assert shown.count("1.20\n[1.10, 1.30]\nPASS") == 2 and "FAIL" not in "".join(shown)
    assert "speedups within 20.0% of the reference cell's" in str(figure.get_suptitle())
    assert [t.get_text() for t in accept.get_yticklabels()] == \
        [row_label(grid, ("short", None, 1)), row_label(grid, ("long", None, 1))]
    assert "(1 shots)" in row_label(grid, ("long", None, 1))
    out = plot_grid(folder)
    assert out.is_file() and out.read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize(("damage", "words"), [
    (lambda text: text[: len(text) // 2], "not valid JSON"),
    (lambda text: "[]", "not a JSON object"),
    (lambda text: text.replace('"questions": 4', '"questions": "4"'), "questions"),
    (lambda text: text.replace('"accept_length": 4.2', '"accept_length": 0.5'),
     "accept_length"),
    (lambda text: text.replace('"status": "error"', '"status": "great"', 1), "status"),
    (lambda text: json.dumps({**json.loads(text), "extra": 1}), "extra"),
])
def test_a_damaged_record_is_named(folder: Path, damage: object, words: str) -> None:
    file = folder / GRID_FILE
    file.write_text(damage(file.read_text()))  # type: ignore[operator]
    with pytest.raises(BadRecord) as caught:
        read_grid(folder)
    assert str(file) in caught.value.message and words in caught.value.message


def test_plot_of_a_damaged_grid_exits_2(folder: Path, tmp_path: Path) -> None:
    (folder / GRID_FILE).write_text("{")
    done = subprocess.run([sys.executable, "-m", "harness", "plot", str(folder)],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 2 and GRID_FILE in done.stderr
    assert "Traceback" not in done.stderr
    missing = tmp_path / "nothing"
    missing.mkdir()
    with pytest.raises(BadRecord, match="missing: not a grid folder"):
        read_grid(missing)
