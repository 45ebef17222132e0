"""The parser of `harness soak`; its work: harness/commands/soak.py."""

from __future__ import annotations

import argparse

from harness.commands import Command, add_build_options, add_results_option


class SoakCommand(Command):
    name = "soak"
    help = ("drift over serving time: one server, the suite's workload repeated for a set "
            "time with prefix caching on, accept length per window, and a gate on its trend")
    work = "harness.commands.soak:run"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("suite", help="suite file or name (see `harness list`)")
        parser.add_argument("--duration", metavar="TIME",
                            help="how long the workload repeats: seconds, or with s, m or h "
                            "(e.g. 10m; default: the suite's soak.duration_s)")
        parser.add_argument("--window", metavar="TIME",
                            help="each window of serving time, at least two in the duration "
                            "(e.g. 1m; default: the suite's soak.window_s)")
        parser.add_argument("--max-drift", type=float, metavar="X",
                            help="tolerated fall of accept length over the run, a share of "
                            "it (default: the suite's soak.max_drift, else 0.05)")
        parser.add_argument("--alpha", type=float,
                            help="the drift gate's one-sided level (default 0.05)")
        parser.add_argument("--inconclusive", choices=("pass", "fail"),
                            help="how a drift neither shown within nor beyond the tolerance "
                            "is judged (default: the suite's, else pass)")
        parser.add_argument("--questions", type=int, metavar="N",
                            help="questions in the repeated workload (default: the suite's)")
        add_results_option(parser)
        add_build_options(parser)
        parser.add_argument("--server", metavar="URL",
                            help="soak a server someone else started (as `harness run "
                            "--server`): no launch, no kill; refused, naming the field, when "
                            "it does not serve what the suite declares. Its prefix cache is "
                            "as it was started")
        parser.add_argument("--label", help="a tag recorded with the soak and its run")
        parser.add_argument("--dry-run", action="store_true",
                            help="print the launch line and the soak's plan; run nothing")
        parser.add_argument("--no-plot", action="store_true", help="draw no plot")
        parser.add_argument("--no-progress", action="store_true", help="no progress bar")
