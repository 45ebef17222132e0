"""Selectors resolved to sides (`harness compare --help`): a run folder, a baseline file or
`baseline:SUITE@LABEL`, a glob of run folders, or SUITE, SUITE@latest / @previous /
@LABEL among the recorded runs. A bad run folder named on its own is an error (exit 2);
one matched by a glob is reported (once per command) and skipped; SUITE@latest /
@previous pass over runs without a figure and say which run they took.
"""

from __future__ import annotations

import glob
from pathlib import Path
from typing import Any

from harness.analysis.sides import Side, add_record, add_run
from harness.analysis.trend import incomplete
from harness.errors import BadInput
from harness.results.baselines import figure_of, load_baselines
from harness.results.layout import RUN_FILE
from harness.results.readers import BadRecord, read_placed_run, read_run
from harness.results.rows import flatten_record
from harness.results.skips import report
from harness.results.store import load_runs


def _baseline_side(selector: str, root: Path, suite: str, label: str) -> Side:
    figures = load_baselines(root, suite)
    for figure in figures:
        if figure.label == label:
            return Side(name=selector, baseline=figure)
    known = ", ".join(f.label for f in figures) or "none"
    raise BadInput(f"{selector}: no baseline {label!r} for suite {suite}; known: {known}")


def resolve_side(selector: str, results: Path, include_incomplete: bool = False) -> Side:
    """Turn a selector into a loaded side; BadInput if nothing usable matches.
    `include_incomplete`: SUITE selectors also take runs that errored or are partial."""
    if selector.startswith("baseline:"):
        suite, _, label = selector.removeprefix("baseline:").partition("@")
        return _baseline_side(selector, results, suite, label)
    path = Path(selector)
    if path.is_file() and path.name != RUN_FILE:
        record = read_run(path)  # a baseline file: external figures lack token sums
        row = flatten_record(record.model_dump(mode="json"), str(path))
        figure = figure_of(row)
        if row["kind"] != "baseline" or figure is None:
            raise BadInput(f"{selector}: a file that is not a run folder must be a baseline")
        return Side(name=selector, baseline=figure)
    if path.exists():
        side = Side(name=selector)
        add_run(side, path.parent if path.name == RUN_FILE else path)
        return side
    if any(c in selector for c in "*?["):
        return _glob_side(selector)
    return _suite_side(selector, results, include_incomplete)


def _glob_side(selector: str) -> Side:
    """Every run folder the pattern matches that has a figure; bad ones reported (once per
    command, as the loader words it) and skipped."""
    side = Side(name=selector)
    skipped: list[str] = []
    matched = sorted(Path(p) for p in glob.glob(selector) if (Path(p) / RUN_FILE).exists())
    unmeasured = 0
    for run_dir in matched:
        try:
            record = read_placed_run(run_dir)  # as the index would take it
            if record.measurement is None:
                unmeasured += 1
                continue
            add_record(side, run_dir, record)
        except BadRecord as error:
            report(skipped, error.path, error.reason)
    if not side.records:
        what = "the pattern matches no run folder" if not matched else (
            f"none of the {len(matched)} run folders it matches has a usable accept length")
        raise BadInput(f"{selector}: {what}")
    if skipped or unmeasured:
        side.note = (f"{selector}: {len(side.records)} run(s); {len(skipped)} unusable and "
                     f"{unmeasured} without an accept length passed over")
    return side


def _describe(row: Any) -> str:
    # the frame's flag is a pandas boolean (True, False or NA), never the `True` object
    partial = ", partial" if str(row["partial"]) == "True" else ""
    return (f"run {row['run_id']} of {row['started_at']:%Y-%m-%d %H:%M} UTC ({row['verdict']}, "
            f"accept length {row['accept_length']:.3f} {row['metric']}{partial}) {row['path']}")


def _suite_side(selector: str, results: Path, include_incomplete: bool = False) -> Side:
    """SUITE, SUITE@latest, SUITE@previous: the latest / the one before among complete runs
    with a figure (runs that errored, or ended before their plan with a partial figure,
    are passed over unless `include_incomplete`); SUITE@LABEL: every such run of that
    label, pooled."""
    suite, _, which = selector.partition("@")
    runs = load_runs(results, suite=suite, kind="run")
    if runs.empty:
        raise BadInput(f"{selector}: no runs of suite {suite!r} under {results}")
    usable = runs["accept_length"].notna()
    if not include_incomplete:
        usable &= ~incomplete(runs)
    measured = runs[usable]
    passed_over = len(runs) - len(measured)
    if which in ("", "latest", "previous"):
        position = -2 if which == "previous" else -1
        if len(measured) < -position:
            raise BadInput(f"{selector}: suite {suite} has {len(measured)} run(s) with an accept "
                           f"length ({passed_over} without one, errored or partial; "
                           "--include-incomplete takes those with a figure)")
        chosen = [measured.iloc[position]]
    else:
        chosen = [row for _, row in measured[measured["label"] == which].iterrows()]
        if not chosen:
            labels = ", ".join(sorted({str(v) for v in measured["label"].dropna()})) or "none"
            raise BadInput(f"{selector}: no run of {suite} labelled {which!r} with an accept "
                           f"length; labels: {labels}")
    side = Side(name=selector)
    for row in chosen:
        add_run(side, Path(row["path"]))
    notes = [_describe(row) for row in chosen[:3]] + (
        [f"... and {len(chosen) - 3} more"] if len(chosen) > 3 else [])
    skipped = (f" ({passed_over} run(s) errored, partial or without an accept length passed "
               "over)" if passed_over else "")
    side.note = f"{selector}: " + "; ".join(notes) + skipped
    return side
