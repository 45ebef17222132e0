"""The latency figure (`latency.png` beside `accept_length.png`) draws the record's own
figures: each panel's marked p50/p90/p99 are the stored ones, its distribution has exactly
the values the stored figure was computed from, and what a run did not record is not drawn."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from harness.analysis.plot_latency import latency_figure, plot_latency
from harness.analysis.plots import plot_run
from harness.cli import main
from harness.results.layout import LATENCY_PNG
from harness.results.readers import read_requests, read_run

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _panels(figure: object) -> dict[str, object]:
    return {axes.get_title(): axes for axes in figure.axes}  # type: ignore[attr-defined]


def test_each_panel_marks_the_recorded_percentiles(run_copy: Callable[[], Path]) -> None:
    run = run_copy()
    record = read_run(run)
    summary = record.measurement.latency
    assert summary is not None and summary.n_timed > 0
    figure = latency_figure(record, read_requests(run, record))
    assert figure is not None
    panels = _panels(figure)
    expected = {"TTFT per request": summary.ttft_s, "TPOT per request": summary.tpot_s,
                "ITL: every gap between chunks": summary.itl_s,
                "end-to-end per request": summary.e2e_s}
    assert set(panels) == {title for title, spread in expected.items() if spread is not None}
    for title, axes in panels.items():
        spread = expected[title]
        factor = 1000.0 if axes.get_xlabel() == "ms" else 1.0  # type: ignore[attr-defined]
        lines = axes.get_lines()  # type: ignore[attr-defined]
        distribution, *markers = lines
        assert len(distribution.get_xdata()) == spread.n  # every value the figure came from
        marked = [float(line.get_xdata()[0]) for line in markers]
        assert marked == [spread.p50 * factor, spread.p90 * factor, spread.p99 * factor]
        # the percentiles sit on the drawn distribution: the inverted-CDF value is one of it
        values = sorted(float(x) for x in distribution.get_xdata())
        assert all(any(abs(v - m) <= 1e-9 * max(1.0, abs(m)) for v in values) for m in marked)


def test_a_run_draws_it_beside_the_accept_length_plot(run_copy: Callable[[], Path]) -> None:
    run = run_copy()
    assert not (run / LATENCY_PNG).exists()
    plot_run(run)
    assert (run / LATENCY_PNG).read_bytes()[:8] == PNG_MAGIC
    (run / LATENCY_PNG).unlink()
    assert main(["plot", str(run)]) == 0
    assert (run / LATENCY_PNG).read_bytes()[:8] == PNG_MAGIC


def test_a_run_recorded_without_latency_draws_none(run_copy: Callable[[], Path]) -> None:
    """A record from before streamed requests (no `measurement.latency`): no panel, no
    zero drawn, and the accept-length plot is still made."""
    run = run_copy()
    document = json.loads((run / "run.json").read_text())
    document["measurement"].pop("latency")
    (run / "run.json").write_text(json.dumps(document))
    assert plot_latency(run) is None
    plot_run(run)
    assert not (run / LATENCY_PNG).exists()
    assert (run / "accept_length.png").is_file()
