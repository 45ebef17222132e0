"""`harness compare` / `harness ab` output: where two builds differ, by category and by
draft position, with significance (compare() and render())."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.analysis.compare import Side, add_run, compare, render
from tests.metrics.test_breakdown_by_category_and_position import RATES, _rows
from tests.results.records import make_run


def _side(results: Path, name: str, rows: list, seed: int) -> Side:
    run_dir = make_run(results, 2.5, n=len(rows), seed=seed, label=name)
    (run_dir / "requests.jsonl").write_text(
        "".join(json.dumps(row.model_dump(mode="json")) + "\n" for row in rows))
    side = Side(name=name)
    add_run(side, run_dir)  # its request rows kept in `side.rows`
    return side


def test_compare_and_render_by_category_and_position(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = _rows(40, 5, RATES, "qa") + _rows(40, 6, RATES, "translation", start=40)
    b = _rows(40, 5, RATES, "qa") + _rows(40, 6, RATES, "translation", collapse_from=3,
                                          start=40)
    result = compare(_side(tmp_path, "fixed", a, 1), _side(tmp_path, "noisy", b, 2))
    categories = result["categories"]
    assert list(categories) == ["qa", "translation"]
    assert categories["qa"]["b_minus_a"] == 0.0
    assert categories["translation"]["p_value"] < 1e-6
    assert [p["position"] for p in result["positions"]] == [1, 2, 3, 4]
    assert result["positions"][2]["p_value"] < 1e-6
    render(result)
    out = capsys.readouterr().out
    assert "by category" in out and "by draft position" in out
    translation = next(line for line in out.splitlines() if "translation" in line)
    assert "**" in translation  # significant at 0.01
    qa = next(line for line in out.splitlines() if " qa " in f" {line} ")
    assert "*" not in qa
    assert "k = 3" in out


def test_no_request_rows_no_breakdown(tmp_path: Path) -> None:
    """A baseline figure has no request rows: no per-category or per-position table."""
    from harness.results.baselines import BaselineFigure

    a = Side(name="a")
    add_run(a, make_run(tmp_path, 2.4, seed=1))
    figure = BaselineFigure(label="post-fix", accept_length=2.6, ci=None, accuracy=None,
                            source="x", engine=None, path="x", metric="per_request")
    result = compare(a, Side(name="b", baseline=figure))
    assert "categories" not in result and "positions" not in result
    assert a.rows  # a run's side keeps its request rows (compare's breakdowns use them)
