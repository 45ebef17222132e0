"""The regression notebook's per-category and per-position section runs on records."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.results.records import make_run

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "compare_regressions.ipynb"


def test_notebook_shows_category_and_position_deltas(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    results = tmp_path / "results"
    start = datetime(2025, 2, 1, tzinfo=UTC)
    for i, (label, value) in enumerate([("pre-fix", 1.9), ("post-fix", 2.5)]):
        make_run(results, value, seed=100 + i, label=label, started_at=start + timedelta(hours=i))
    monkeypatch.setenv("HARNESS_RESULTS", str(results))
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(notebook, timeout=120, kernel_name="python3",
                                     resources={"metadata": {"path": str(NOTEBOOK.parent)}})
    client.execute(env=dict(os.environ))
    cell = next(c for c in notebook.cells if c.cell_type == "code"
                and "compare_categories" in c.source)
    text = "\n".join(str(o.get("data", {}).get("text/plain", "")) for o in cell.outputs)
    assert "category" in text and "position" in text
    assert "all" in text  # records without categories form one category
    assert "pre-fix" in text and "post-fix" in text
