"""The parser of `harness sweep`; its work: harness/commands/sweep.py."""

from __future__ import annotations

import argparse

from harness.commands.parsers import options
from harness.commands.parsers.options import SuiteCommand


class SweepCommand(SuiteCommand, name="sweep", work="harness.commands.sweep:run"):
    help = ("measure a suite's workload at several concurrencies on one launch: accept "
            "length, latency and throughput per point, a plot against concurrency, and "
            "with --max-drop a paired gate of each point against concurrency 1")

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--concurrency", required=True, metavar="N,N,...",
                            help="requests in flight at each point, e.g. 1,4,16,64 (each at "
                            "most the workload's questions); each point is the series "
                            "<suite>.cN")
        options.add_results_option(parser)
        parser.add_argument("--max-drop", type=float, metavar="X",
                            help="gate: accept length at each concurrency within X (a share, "
                            "e.g. 0.05) of concurrency 1's, paired by prompt; needs 1 in "
                            "--concurrency")
        options.add_gate_options(
            parser, alpha=0.05, inconclusive="pass",
            alpha_help="the gate's one-sided level (default 0.05)",
            inconclusive_help="how a gate finding that is neither shown worse nor shown not "
            "worse is judged (default pass, as [gate])")
        options.add_build_options(parser)
        options.add_record_options(
            parser, label_help="a tag recorded with every point's run",
            dry_run_help="print the launch command and every point's plan; run nothing",
            plot_help="draw neither the sweep's plot nor the points' own")
