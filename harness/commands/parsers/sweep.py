"""The parser of `harness sweep`; its work: harness/commands/sweep.py."""

from __future__ import annotations

import argparse

from harness.commands import Command, add_build_options, add_results_option


class SweepCommand(Command):
    name = "sweep"
    help = ("measure a suite's workload at several concurrencies on one launch: accept "
            "length, latency and throughput per point, a plot against concurrency, and "
            "with --max-drop a paired gate of each point against concurrency 1")
    work = "harness.commands.sweep:run"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("suite", help="suite file or name (see `harness list`)")
        parser.add_argument("--concurrency", required=True, metavar="N,N,...",
                            help="requests in flight at each point, e.g. 1,4,16,64 (each at "
                            "most the workload's questions); each point is the series "
                            "<suite>.cN")
        add_results_option(parser)
        parser.add_argument("--max-drop", type=float, metavar="X",
                            help="gate: accept length at each concurrency within X (a share, "
                            "e.g. 0.05) of concurrency 1's, paired by prompt; needs 1 in "
                            "--concurrency")
        parser.add_argument("--alpha", type=float, default=0.05,
                            help="the gate's one-sided level (default 0.05)")
        parser.add_argument("--inconclusive", choices=("pass", "fail"), default="pass",
                            help="how a gate finding that is neither shown worse nor shown "
                            "not worse is judged (default pass, as [gate])")
        add_build_options(parser)
        parser.add_argument("--label", help="a tag recorded with every point's run")
        parser.add_argument("--dry-run", action="store_true",
                            help="print the launch command and every point's plan; run nothing")
        parser.add_argument("--no-plot", action="store_true",
                            help="draw neither the sweep's plot nor the points' own")
        parser.add_argument("--no-progress", action="store_true", help="no progress bar")
