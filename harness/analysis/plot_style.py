"""What every plot shares: colours, the headless figure and its atomic PNG write, and which
of a record's figures a plot may draw (never two definitions mixed).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from harness.metrics.floor_checks import FloorCheck, recorded_floor_checks
from harness.results.rows import METRICS
from harness.secrets import redact_text

if TYPE_CHECKING:
    from harness.results.record import RunRecord

VERDICT_COLOURS = {"pass": "#2a9d4b", "fail": "#d62828", "error": "#7a7a7a", "skipped": "#999999"}
BASELINE_COLOURS = ("#1f77b4", "#ff7f0e", "#9467bd", "#8c564b", "#17becf", "#bcbd22")
FLOOR_COLOUR = "#d62828"


def new_figure(width: float, height: float) -> Figure:
    figure = Figure(figsize=(width, height), dpi=110, layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def save_png(figure: Figure, out: Path) -> Path:
    out.parent.mkdir(parents=True, exist_ok=True)
    # Write beside and rename: a reader (CI artefact upload) never sees half a PNG.
    partial = out.with_name(f".{out.name}.partial.png")
    figure.savefig(partial, format="png")
    partial.replace(out)
    return out


def record_floor_checks(record: RunRecord) -> list[FloorCheck]:
    """The floors the run's suite declares, as the judge checks them
    (`harness.metrics.floor_checks`), in the suite's definition."""
    return recorded_floor_checks(record.suite.document, suite_metric(record))


def suite_floor(record: RunRecord) -> float | None:
    """The accept-length floor of the run's suite."""
    return next((check.floor for check in record_floor_checks(record)
                 if check.kind == "accept_length"), None)


def category_floor_checks(record: RunRecord) -> dict[str, FloorCheck]:
    """Each category's accept-length floor, by category."""
    return {str(check.category): check for check in record_floor_checks(record)
            if check.kind == "category_accept_length"}


def position_floor_checks(record: RunRecord) -> dict[int, FloorCheck]:
    """Each draft position's floor, by k."""
    return {int(check.position or 0): check for check in record_floor_checks(record)
            if check.kind == "position"}


def suite_metric(record: RunRecord) -> str:
    """The accept-length definition the run's suite judges (its floors and baselines)."""
    return document_metric(record.suite.document, record.schema_version)


def document_metric(document: dict[str, object], schema_version: int) -> str:
    floors = document.get("floors")
    metric = floors.get("metric") if isinstance(floors, dict) else None
    if metric in METRICS:
        return str(metric)
    # v1 suites had no field: their figures were per-request ratios
    return "server_avg" if schema_version >= 2 else "per_request"


def figure_in(record: RunRecord, metric: str) -> tuple[float, tuple[float, float] | None] | None:
    """The run's accept length (and CI, when it is the judged one) in `metric`; never mixed."""
    measurement = record.measurement
    if measurement is None:
        return None
    if measurement.metric == metric:
        return measurement.accept_length, measurement.accept_length_ci
    value = getattr(measurement, f"accept_length_{metric}", None)
    ci = getattr(measurement, f"accept_length_{metric}_ci", None)  # the means keep theirs
    return (float(value), ci) if isinstance(value, int | float) else None


SHOWN_CHARS = 48  # a label, id or spec as a tick or title shows it


def shown(text: object, limit: int = SHOWN_CHARS) -> str:
    """A name as a plot shows it: redacted, then at most `limit` characters (the record
    keeps it whole)."""
    value = redact_text(str(text))
    return value if len(value) <= limit else value[: limit - 1] + "…"


def error_bar(value: float, low: float, high: float) -> tuple[float, float]:
    """(below, above) for `errorbar`: never negative, never NaN. A CI that does not hold
    its own figure (a percentile bootstrap can, rarely; a damaged record can) is drawn
    up to the figure rather than crashing the plot."""
    def length(d: float) -> float:
        return d if d == d and d > 0 else 0.0  # NaN != NaN

    return length(value - low), length(high - value)


def error_bars(values: np.ndarray, low: np.ndarray, high: np.ndarray) -> list[np.ndarray]:
    """`error_bar` over arrays (numpy), as `errorbar(yerr=...)` takes them."""
    below = np.nan_to_num(np.clip(values - low, 0, None), nan=0.0)
    above = np.nan_to_num(np.clip(high - values, 0, None), nan=0.0)
    return [below, above]
