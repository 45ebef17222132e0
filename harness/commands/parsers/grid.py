"""The parser of `harness grid`; its work: harness/commands/grid.py."""

from __future__ import annotations

import argparse

from harness.commands.parsers import options
from harness.commands.parsers.options import SuiteCommand


class GridCommand(SuiteCommand, name="grid", work="harness.commands.grid:run"):
    help = ("measure a suite's [grid]: accept length and speedup per cell of prompt-length "
            "tier x content category x prefix caching x concurrency, a launch per prefix-"
            "caching setting, a heatmap, and with [grid] reference each cell gated against "
            "its reference cell")
    suite_help = "suite file or name with a [grid] table"

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        options.add_results_and_build_options(parser)
        options.add_record_options(
            parser, label_help="a tag recorded with every cell's run",
            dry_run_help="print each launch's command and every cell's plan; run nothing",
            plot_help="draw neither the grid's heatmap nor the cells' own plots")
