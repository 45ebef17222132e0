"""The parser of `harness grid`; its work: harness/commands/grid.py."""

from __future__ import annotations

import argparse

from harness.commands import Command, add_build_options, add_results_option


class GridCommand(Command):
    name = "grid"
    help = ("measure a suite's [grid]: accept length and speedup per cell of prompt-length "
            "tier x content category x prefix caching x concurrency, a launch per prefix-"
            "caching setting, a heatmap, and with [grid] reference each cell gated against "
            "its reference cell")
    work = "harness.commands.grid:run"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("suite", help="suite file or name with a [grid] table")
        add_results_option(parser)
        add_build_options(parser)
        parser.add_argument("--label", help="a tag recorded with every cell's run")
        parser.add_argument("--dry-run", action="store_true",
                            help="print each launch's command and every cell's plan; run "
                            "nothing")
        parser.add_argument("--no-plot", action="store_true",
                            help="draw neither the grid's heatmap nor the cells' own plots")
        parser.add_argument("--no-progress", action="store_true", help="no progress bar")
