"""The regression notebook executes on a results folder of synthetic records."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.analysis.test_trend_by_question import seven_nights
from tests.results.records import make_history, make_run

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "compare_regressions.ipynb"


def _executed_outputs() -> list[dict[str, object]]:
    """The notebook run top to bottom in a kernel (HARNESS_RESULTS as the test set it):
    every code cell's outputs."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(notebook, timeout=120, kernel_name="python3",
                                     resources={"metadata": {"path": str(NOTEBOOK.parent)}})
    client.execute(env=dict(os.environ))
    return [output for cell in notebook.cells if cell.cell_type == "code"
            for output in cell.outputs]


def _shown_text(outputs: list[dict[str, object]]) -> str:
    """What a reader sees as text: printed lines and each value's plain form."""
    return "\n".join(str(output.get("text", "")) + str(output.get("data", {}).get("text/plain", ""))
                     for output in outputs)  # fmt: skip


def test_notebook_is_stored_without_outputs() -> None:
    nbformat = pytest.importorskip("nbformat")
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    for cell in notebook.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None


def test_notebook_executes(results: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    make_history(results, nights=4)
    start = datetime(2025, 2, 1, tzinfo=UTC)
    for i, (label, value) in enumerate([("pre-fix", 1.9), ("post-fix", 2.5)] * 2):
        make_run(results, value, seed=100 + i, label=label, started_at=start + timedelta(hours=i))
    (results / "baselines").mkdir()
    (results / "baselines" / "broken.json").write_text("{")  # reported, not fatal
    monkeypatch.setenv("HARNESS_RESULTS", str(results))
    text = _shown_text(_executed_outputs())
    assert "broken.json" in text
    assert "pre-fix" in text and "paired" in text
    assert (results / "plots" / "tiny_dflash_cpu" / "history.png").is_file()


def test_notebook_tables_hide_url_credentials(results: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 20, case 1: a record whose build spec carries URL credentials (written by an
    older harness) shows in the notebook's tables without them."""
    spec = "git+https://oauth2:ghp_PLANTEDnotebook@github.com/org/sglang@main"
    make_history(results, nights=2)
    make_run(results, 2.4, label="pre-fix", spec=spec)
    monkeypatch.setenv("HARNESS_RESULTS", str(results))
    text = "\n".join(str(output) for output in _executed_outputs())
    assert "ghp_PLANTEDnotebook" not in text
    assert "oauth2:<redacted>" in text or "oauth2:&lt;redacted&gt;" in text  # text or HTML


def test_notebook_shows_the_step_and_compares_two_builds_by_question(
        results: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 51: on the issue's history (4 nights of one build at 3.8465, 3 of another at
    3.6870, written here, no committed results) the notebook shows the step with its night
    and size, judged by question, and compares the two builds paired by question."""
    seven_nights(results)
    monkeypatch.setenv("HARNESS_RESULTS", str(results))
    text = _shown_text(_executed_outputs())
    assert "tiny_dflash_cpu: drop -0.16 since 2026-11-05" in text
    assert "2026-11-05 02:00" in text and "-0.1595" in text  # the night and the size
    assert "by question" in text
    assert "paired by question" in text and "reference:noise=0.03" in text
