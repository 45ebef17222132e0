"""The parser of `harness calibrate`; its work: harness/commands/calibrate.py."""

from __future__ import annotations

import argparse

from harness.commands import Command
from harness.commands.parsers.options import (
    add_engine_python_option,
    add_json_option,
    add_results_option,
    add_suite_argument,
)


class CalibrateCommand(Command):
    name = "calibrate"
    help = "repeat a suite's runs on one build: run-to-run spread, suggested floor and tolerance"
    work = "harness.commands.calibrate:run"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        add_suite_argument(parser)
        parser.add_argument("--runs", type=int, required=True, metavar="N",
                            help="repeats (>= 2; each a fresh launch)")
        parser.add_argument("--build", "--sglang", dest="sglang", metavar="SPEC",
                            help="build to calibrate (the same grammar as `harness run`)")
        parser.add_argument("--entry", action="append", dest="entries", metavar="NAME",
                            help="calibrate only this workload entry (repeatable)")
        add_results_option(parser)
        add_engine_python_option(parser)
        add_json_option(parser, "print the record as JSON")
