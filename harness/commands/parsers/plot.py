"""The parser of `harness plot`; its work: harness/commands/plot.py."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.commands import Command
from harness.commands.parsers import options


class PlotCommand(Command, name="plot", work="harness.commands.plot:run"):
    help = "draw PNGs: a run against baselines and floor, its histograms, or a suite's history"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("target", help="a run folder (results/runs/SUITE/RUN), a run's id "
                            "(e6cf2e4b, a unique prefix will do), a suite name, or a sweep's "
                            "folder (results/sweeps/SUITE/SWEEP: its figure)")
        options.add_results_option(parser)
        parser.add_argument("--kind", choices=("run", "history", "histogram"),
                            help="run: accept length vs baselines and floor (default for a run "
                            "folder), written to RUN/accept_length.png; histogram: per-request "
                            "accept length and per-position acceptance, RUN/accept_histogram.png; "
                            "history: the suite over time (default for a suite name), "
                            "results/plots/SUITE/history.png")
        parser.add_argument("--out", type=Path, metavar="PNG", help="write here instead")
