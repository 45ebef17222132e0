"""The parser of `harness trend`; its work: harness/commands/trend.py."""

from __future__ import annotations

import argparse

from harness.commands import Command
from harness.commands.parsers import options


class TrendCommand(Command, name="trend", work="harness.commands.trend:run"):
    help = (
        "detect steps in each suite's accept-length history; exit 1 when a latest run is "
        "below its floor or a drop is open, 3 when a latest run errored or a named suite has "
        "no run"
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("suites", nargs="*", metavar="SUITE", help="suite names (default: all)")
        options.add_results_option(parser)
        output = parser.add_mutually_exclusive_group()
        output.add_argument(
            "--markdown",
            action="store_true",
            help="print the summary as a markdown table (for a CI step summary)",
        )
        output.add_argument("--json", action="store_true", help="print steps and alarms as JSON")
        parser.add_argument(
            "--plot",
            action="store_true",
            help="write results/plots/<suite>/trend.png with the steps marked",
        )
        parser.add_argument(
            "--window",
            type=int,
            default=60,
            metavar="N",
            help="look at the last N runs of each suite (default 60)",
        )
        parser.add_argument(
            "--min-shift",
            type=float,
            default=0.1,
            metavar="X",
            help="smallest accept-length step that counts (default 0.1)",
        )
        parser.add_argument(
            "--since",
            default=None,
            metavar="TIME",
            help="only runs started at or after TIME (ISO 8601, UTC) are tonight's: a suite "
            "whose latest run is older has no verdict, which is an error (exit 3)",
        )
        parser.add_argument(
            "--max-age",
            default=None,
            metavar="AGE",
            help="a series whose latest night is older than AGE (e.g. 26h, 2d) is an error "
            "(exit 3): a night killed before its run folder existed leaves no other trace",
        )
        parser.add_argument(
            "--by-ci",
            action="store_true",
            help="judge every history by each night's CI over questions, even where the "
            "nights asked the same questions (by default those are compared by question)",
        )
        parser.add_argument(
            "--label",
            default=None,
            metavar="LABEL",
            help="only runs with this label (e.g. main or release: one trend line each)",
        )
        parser.add_argument(
            "--include-incomplete",
            action="store_true",
            help="bring runs that errored or ended before their plan (partial) into the "
            "history and the change since the last run, marked; by default they are left out",
        )
        parser.add_argument(
            "--alpha",
            type=float,
            default=0.01,
            help="false-alarm probability per suite history (default 0.01)",
        )
