"""The data behind each chart of a suite page, as JSON written beside the page
(`suites/<series>.history.json`, `.categories.json`, `.positions.json`): what a reader
needs to redraw or check a chart without the records. Each names the definition of its
figure (`metric`, `definition`), as every stored figure does.
"""

from __future__ import annotations

import math
from typing import Any

from harness.publish.charts import PanelRows, category_rows, drawn, position_rows
from harness.publish.model import SeriesView, commit_url


def _number(value: Any) -> float | None:
    """A figure to 4 decimals, as the pages show it; None if missing."""
    return (round(float(value), 4) if isinstance(value, int | float) and math.isfinite(value)
            else None)


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


NIGHT_COLUMNS = ("started_at", "run_id", "accept_length", "ci_low", "ci_high", "verdict",
                 "build", "commit", "page")


def _when(moment: Any) -> str:
    """UTC to the second, ISO 8601 with Z: the shortest exact form."""
    text: str = moment.tz_convert("UTC").strftime("%Y-%m-%dT%H:%M:%SZ")
    return text


def history_data(series: SeriesView, pages: dict[str, str], definition: str
                 ) -> dict[str, object]:
    """Every night the history chart draws (each line's runs in the series' definition),
    its steps, the floor and baselines. Nights are rows of `columns`, so a thousand nights
    stay small: `build` indexes `builds` (the specs), `commit` is the commit the build
    resolved; `commit_url` names the page of each commit where the spec is a git ref on
    a known forge (the rule the site's links follow: `{commit}` replaced)."""
    specs: dict[str | None, int] = {}
    lines = []
    for line in series.lines:
        nights = []
        for row in drawn(series, line).to_dict("records"):
            spec = _text(row.get("build.spec")) or _text(row.get("build.engine"))
            nights.append([
                _when(row["started_at"]), row.get("run_id"), _number(row.get("accept_length")),
                _number(row.get("ci_low")), _number(row.get("ci_high")),
                _text(row.get("verdict")), specs.setdefault(spec, len(specs)),
                _text(row.get("build.git_sha")), pages.get(str(row.get("path")))])
        steps = [{"at": view.step.at.isoformat() if view.step.at else None,
                  "first_run": view.after.get("run_id"), "before": view.step.before,
                  "after": view.step.after, "delta": view.step.delta, "z": view.step.z,
                  "open": view.is_open} for view in line.steps]
        lines.append({"line": line.name, "judged_by": line.trend.judged_by,
                      "comparison": line.trend.comparison, "notes": list(line.trend.notes),
                      "nights": nights, "steps": steps})
    builds = [{"build": spec, "commit_url": _url_rule(spec)} for spec in specs]
    return {"series": series.name, "chart": "history", "metric": series.metric,
            "definition": definition, "floor": series.floor,
            "baselines": [{"label": b.label, "accept_length": b.accept_length}
                          for b in series.baselines],
            "columns": list(NIGHT_COLUMNS), "builds": builds, "lines": lines}


def _url_rule(spec: str | None) -> str | None:
    """The commit page of this spec's repository with `{commit}` for the sha (None: not
    a git ref on a forge the site links)."""
    found = commit_url(spec, "0" * 40)
    return found.replace("0" * 40, "{commit}") if found else None


def _panel(series: SeriesView, chart: str, rows: PanelRows, x: str, y: str
           ) -> dict[str, object]:
    return {"series": series.name, "chart": chart, "metric": series.metric, "y": y,
            "lines": [{"line": line, "points": [
                {x: name, "value": _number(value),
                 "ci": [_number(ci[0]), _number(ci[1])] if ci else None, "floor": floor}
                for name, value, ci, floor in items]} for line, _colour, items in rows]}


def categories_data(series: SeriesView) -> dict[str, object] | None:
    rows = category_rows(series)
    return _panel(series, "categories", rows, "category", "accept length") if rows else None


def positions_data(series: SeriesView) -> dict[str, object] | None:
    rows = position_rows(series)
    return (_panel(series, "positions", rows, "position", "P(draft position k accepted)")
            if rows else None)
