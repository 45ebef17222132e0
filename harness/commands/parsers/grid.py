"""The parser of `harness grid`; its work: harness/commands/grid.py."""

from __future__ import annotations

import argparse

from harness.commands import Command
from harness.commands.parsers.options import (
    add_build_options,
    add_record_options,
    add_results_option,
    add_suite_argument,
)


class GridCommand(Command):
    name = "grid"
    help = ("measure a suite's [grid]: accept length and speedup per cell of prompt-length "
            "tier x content category x prefix caching x concurrency, a launch per prefix-"
            "caching setting, a heatmap, and with [grid] reference each cell gated against "
            "its reference cell")
    work = "harness.commands.grid:run"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        add_suite_argument(parser, "suite file or name with a [grid] table")
        add_results_option(parser)
        add_build_options(parser)
        add_record_options(parser, label_help="a tag recorded with every cell's run",
                           dry_run_help="print each launch's command and every cell's plan; "
                           "run nothing",
                           plot_help="draw neither the grid's heatmap nor the cells' own plots")
