"""The parser of `harness calibrate`; its work: harness/commands/calibrate.py."""

from __future__ import annotations

import argparse

from harness.commands.parsers import options
from harness.commands.parsers.options import SuiteCommand


class CalibrateCommand(SuiteCommand, name="calibrate", work="harness.commands.calibrate:run"):
    help = "repeat a suite's runs on one build: run-to-run spread, suggested floor and tolerance"
    suite_help = options.SUITE_HELP

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--runs", type=int, required=True, metavar="N",
                            help="repeats (>= 2; each a fresh launch)")
        parser.add_argument("--build", "--sglang", dest="sglang", metavar="SPEC",
                            help="build to calibrate (the same grammar as `harness run`)")
        parser.add_argument("--entry", action="append", dest="entries", metavar="NAME",
                            help="calibrate only this workload entry (repeatable)")
        options.add_results_option(parser)
        options.add_engine_python_option(parser)
        options.add_json_option(parser, "print the record as JSON")
