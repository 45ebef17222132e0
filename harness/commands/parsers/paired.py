"""The parser of `harness paired`; its work: harness/commands/paired.py."""

from __future__ import annotations

import argparse

from harness.commands import Command
from harness.commands.parsers import options


class PairedCommand(Command, name="paired", work="harness.commands.paired:run"):
    help = "the latest paired-gate finding of each suite (B vs its reference), beside the floors"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("suites", nargs="*", metavar="SERIES",
                            help="suites or series (default: every one with runs)")
        options.add_results_option(parser)
        parser.add_argument("--since", metavar="TIME",
                            help="only runs started at or after this ISO time (UTC)")
        parser.add_argument("--max-age", metavar="AGE",
                            help="a series whose latest night is older than AGE (e.g. 26h, "
                                 "2d) is an error (exit 3)")
        parser.add_argument("--label", help="only runs with this label (e.g. main)")
        parser.add_argument("--markdown", action="store_true", help="a Markdown table")
        parser.add_argument("--json", action="store_true", help="JSON rows")
        parser.epilog = ("Judges only the latest run of each series (a suite expands to its "
                         "workload entries). Exit codes: 0 every latest run passed; 1 one "
                         "failed (floors or paired gate); else 3 a latest run errored, or a named "
                         "series has no paired run that matches, or a latest night is older "
                         "than --max-age, or --since finds no run at all.")
