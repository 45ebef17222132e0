"""The plots draw the floors the judge checks (`floor_checks`) and mark a figure below its
floor as the judge would: with the floor's own strictness."""

from __future__ import annotations

from pathlib import Path

import pytest
from matplotlib.colors import to_hex

from harness.analysis.plot_categories import categories_figure
from harness.analysis.plot_style import VERDICT_COLOURS, position_floor_checks, suite_floor
from harness.analysis.plots import histogram_figure
from harness.results.readers import read_run
from harness.results.record import CategoryResult
from tests.results.records import make_run

FAIL = VERDICT_COLOURS["fail"]


@pytest.mark.parametrize(("strict", "below"), [(False, False), (True, True)])
def test_a_category_exactly_at_its_floor_is_below_only_when_strict(
        tmp_path: Path, strict: bool, below: bool) -> None:
    record = read_run(make_run(tmp_path / "results", 2.5))
    record.measurement.categories = {"qa": CategoryResult(
        n_prompts=5, n_requests=5, accept_length=2.5, accept_length_ci=(2.2, 2.8))}
    record.suite.document["floors"]["categories"] = {"qa": {"accept_length": 2.5,
                                                            "strict": strict}}
    axes = categories_figure(record).axes[0]
    colour = to_hex(axes.containers[0].lines[0].get_color())
    assert (colour == FAIL) is below


def test_position_bars_below_their_floor_are_marked(tmp_path: Path) -> None:
    record = read_run(make_run(tmp_path / "results", 2.5))
    rates = record.measurement.per_position_acceptance
    assert rates is not None and len(rates) == 2
    record.suite.document["floors"]["positions"] = [rates[0], rates[1] + 0.01]
    record.suite.document["floors"]["positions_strict"] = False
    assert sorted(position_floor_checks(record)) == [1, 2]
    right = histogram_figure(record, [], suite_floor(record)).axes[1]
    colours = [to_hex(bar.get_facecolor()) for bar in right.patches]
    assert colours[0] != FAIL and colours[1] == FAIL  # at its floor (>=) / below it
    assert len([line for line in right.collections]) >= 2  # both floors drawn


def test_floors_that_do_not_validate_are_not_drawn(tmp_path: Path) -> None:
    record = read_run(make_run(tmp_path / "results", 2.5, floor=2.0))
    assert suite_floor(record) == 2.0
    record.suite.document["floors"]["surprise"] = 1  # a field no suite has: not a floor
    assert suite_floor(record) is None
