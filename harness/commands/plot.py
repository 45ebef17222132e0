"""`harness plot RUN_DIR|SUITE`: draw a run, its per-request histogram, or a suite's history."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.analysis import plots
from harness.analysis.forced_plot import plot_forced
from harness.analysis.grid_plot import plot_grid
from harness.analysis.sweep_plot import plot_sweep
from harness.commands.run_ids import run_by_id
from harness.errors import BadInput, ExitCode
from harness.results.forced import FORCED_FILE
from harness.results.grid import GRID_FILE
from harness.results.layout import RUN_FILE
from harness.results.readers import BadRecord, read_forced, read_run
from harness.results.store import load_runs
from harness.results.sweeps import SWEEP_FILE


def run(args: argparse.Namespace) -> ExitCode:
    """`harness plot` (its arguments: commands/parsers/plot.py)."""
    target = run_by_id(args.target, args.results) or Path(args.target)
    if (target / SWEEP_FILE).is_file():  # a sweep's folder: its figure (harness sweep)
        print(plot_sweep(target, out=args.out))
        return ExitCode.PASS
    if (target / GRID_FILE).is_file():  # a grid's folder: its heatmap (harness grid)
        print(plot_grid(target, out=args.out))
        return ExitCode.PASS
    if (target / FORCED_FILE).exists() or target.name == FORCED_FILE:  # harness forced
        folder = target.parent if target.name == FORCED_FILE else target
        record = read_forced(folder)
        against = None
        if record.split is not None and record.split.against_dir is not None:
            root = plots.results_root_of(folder)
            theirs = (root / record.split.against_dir).resolve()
            if not theirs.is_relative_to(root):
                raise BadRecord(folder / FORCED_FILE, f"split.against_dir "
                                f"{record.split.against_dir!r:.80} is outside {root}")
            against = read_forced(theirs)
        print(plot_forced(folder, record, against, out=args.out))
        return ExitCode.PASS
    is_run = (target / RUN_FILE).exists() or target.name == RUN_FILE  # FIFO: refused later
    run_dir = target.parent if target.name == RUN_FILE else target
    kind = args.kind or ("run" if is_run else "history")
    if kind in ("run", "histogram") and not is_run:
        raise BadInput(f"{args.target}: not a run folder (no {RUN_FILE})")
    if kind in ("run", "histogram"):
        draw = plots.plot_run if kind == "run" else plots.plot_histogram
        written = draw(run_dir, out=args.out)
    else:
        if is_run:  # its suite's history: the run names it through the door
            suite = read_run(run_dir).suite.name
            results = plots.results_root_of(run_dir)
        else:
            suite, results = args.target, args.results
        runs = load_runs(results, suite=suite)
        if runs.empty:
            raise BadInput(f"{suite}: no records under {results}")
        written = plots.plot_history(results, suite, out=args.out, runs=runs)
    print(written)
    return ExitCode.PASS


