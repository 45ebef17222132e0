"""`harness plot RUN_DIR|SUITE`: draw a run, its per-request histogram, or a suite's history."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.commands import add_results_option


class PlotCommand:
    name = "plot"
    help = "draw PNGs: a run against baselines and floor, its histograms, or a suite's history"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("target", help="a run folder (results/runs/SUITE/RUN), a run's id "
                            "(e6cf2e4b, a unique prefix will do), a suite name, or a sweep's "
                            "folder (results/sweeps/SUITE/SWEEP: its figure)")
        add_results_option(parser)
        parser.add_argument("--kind", choices=("run", "history", "histogram"),
                            help="run: accept length vs baselines and floor (default for a run "
                            "folder), written to RUN/accept_length.png; histogram: per-request "
                            "accept length and per-position acceptance, RUN/accept_histogram.png; "
                            "history: the suite over time (default for a suite name), "
                            "results/plots/SUITE/history.png")
        parser.add_argument("--out", type=Path, metavar="PNG", help="write here instead")

    def run(self, args: argparse.Namespace) -> int:
        from harness.commands import run_by_id
        from harness.errors import BadInput
        from harness.results.layout import RUN_FILE

        target = run_by_id(args.target, args.results) or Path(args.target)
        from harness.results.sweeps import SWEEP_FILE

        if (target / SWEEP_FILE).is_file():  # a sweep's folder: its figure (harness sweep)
            from harness.analysis.sweep_plot import plot_sweep

            print(plot_sweep(target, out=args.out))
            return 0
        is_run = (target / RUN_FILE).exists() or target.name == RUN_FILE  # FIFO: refused later
        run_dir = target.parent if target.name == RUN_FILE else target
        kind = args.kind or ("run" if is_run else "history")
        if kind in ("run", "histogram") and not is_run:
            raise BadInput(f"{args.target}: not a run folder (no {RUN_FILE})")
        from harness.analysis import plots

        if kind in ("run", "histogram"):
            draw = plots.plot_run if kind == "run" else plots.plot_histogram
            written = draw(run_dir, out=args.out)
        else:
            from harness.results.store import load_runs

            if is_run:  # its suite's history: the run names it through the door
                from harness.results.readers import read_run

                suite = read_run(run_dir).suite.name
                results = plots.results_root_of(run_dir)
            else:
                suite, results = args.target, args.results
            runs = load_runs(results, suite=suite)
            if runs.empty:
                raise BadInput(f"{suite}: no records under {results}")
            written = plots.plot_history(results, suite, out=args.out, runs=runs)
        print(written)
        return 0
