"""The parser of `harness ab`; its work: harness/commands/ab.py."""

from __future__ import annotations

import argparse

from harness.commands.parsers import options
from harness.commands.parsers.options import SuiteCommand


class ABCommand(SuiteCommand, name="ab", work="harness.commands.ab:run"):
    help = "run a suite on two engine builds (e.g. pre-fix vs post-fix) and compare them"
    suite_help = options.SUITE_HELP

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--a", required=True, metavar="SPEC",
                            help="build A (e.g. sglang==0.5.17, git URL@ref, local checkout; "
                            "for a reference-engine suite reference:policy=regressed,noise=0)")
        parser.add_argument("--b", required=True, metavar="SPEC", help="build B")
        parser.add_argument("--b-suite", metavar="SUITE",
                            help="run build B on this suite instead: another engine's suite "
                            "with the same workload (e.g. reference vs vLLM on CPU, SGLang vs "
                            "vLLM on GPU); the runs are paired by question, entry by entry")
        parser.add_argument("--label-a", default="a", help="label recorded with run A")
        parser.add_argument("--label-b", default="b", help="label recorded with run B")
        options.add_results_option(parser)
        options.add_engine_python_option(parser)
        options.add_json_option(parser, "print the comparison as JSON")
        parser.add_argument("--fail-on-drop", action="store_true",
                            help="exit 1 when B is significantly below A (at the suite's alpha), "
                            "3 when no drop test can be made")
