"""The parser of `harness power`; its work: harness/commands/power.py."""

from __future__ import annotations

import argparse

from harness.commands.parsers import options
from harness.commands.parsers.options import SuiteCommand


class PowerCommand(SuiteCommand, name="power", work="harness.commands.power:run"):
    help = "print the gate's error rates vs true accept length and number of prompts for a suite"
    suite_help = options.SUITE_HELP

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        options.add_results_option(
            parser, "per-prompt spread is taken from the suite's latest runs here")
        for rate, wrong in (("alpha", "false-fail"), ("beta", "false-pass")):
            parser.add_argument(f"--{rate}", type=float, help=f"tolerated {wrong} rate "
                                f"(default: the suite's floors.{rate})")
        parser.add_argument("--sd", type=float, metavar="SD",
                            help="per-prompt sd of the suite's metric (default: from the latest "
                            "recorded runs, else a documented default, see docs/statistics.md)")
        parser.add_argument("--runs", type=int, default=5, metavar="N",
                            help="how many latest runs to estimate the spread from (default 5)")
        parser.add_argument("--paired-sd", type=float, metavar="SD",
                            help="per-question sd of B - A for the paired gate (default: from "
                            "the suite's latest paired runs, else an assumed 0.75)")
        options.add_json_option(parser, "print JSON instead of a table")
