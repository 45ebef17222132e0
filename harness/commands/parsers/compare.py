"""The parser of `harness compare`; its work: harness/commands/compare.py."""

from __future__ import annotations

import argparse

from harness.commands import Command
from harness.commands.parsers import options

SELECTOR_HELP = """\
A side is one of:
  RUN_DIR or RUN_DIR/run.json     one run folder
  RUN_ID                          the run with that id in --results (e6cf2e4b, the
                                  folder name's end; a unique prefix of 4+ digits will do)
  'results/runs/SUITE/2025*'      a glob of run folders (quote it): a pooled set;
                                  unusable folders are reported and skipped
  SUITE or SUITE@latest           the latest complete run of SUITE in --results with a figure
  SUITE@previous                  the one before it (errored, partial and unmeasured
                                  runs passed over; see --include-incomplete)
  SUITE@LABEL                     every run of SUITE labelled LABEL (a pooled set)
  baseline:SUITE@LABEL            a baseline record (a fixed figure, no per-request data)
  FILE.json                       a baseline record file"""


class CompareCommand(Command, name="compare", work="harness.commands.compare:run"):
    help = "compare two runs or sets of runs: accept length with CI, difference, p-value"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        options.add_raw_epilog(
            parser,
            SELECTOR_HELP + "\n\nThe difference is B - A, under the accept-length definition "
            "both sides give\n(server_avg or per_request); with --fail-on-drop the exit code "
            "is 1 when B is\nsignificantly below A (one-sided, at --alpha), 3 when no drop "
            "test can be made\n(figures only, too few questions).",
        )
        parser.add_argument("a", help="side A (see below)")
        parser.add_argument("b", help="side B (see below)")
        options.add_results_option(parser, "results folder for suite selectors")
        parser.add_argument("--level", type=float, default=0.95, help="CI level (default 0.95)")
        options.add_json_option(parser, "print JSON instead of a table")
        parser.add_argument("--fail-on-drop", action="store_true",
                            help="exit 1 when B's accept length is significantly below A's")
        parser.add_argument("--alpha", type=float, default=0.05,
                            help="level of the drop test for --fail-on-drop (default 0.05)")
        parser.add_argument("--include-incomplete", action="store_true",
                            help="SUITE selectors also take runs that errored or ended before "
                            "their plan (partial; marked in the note); by default they are "
                            "passed over")
