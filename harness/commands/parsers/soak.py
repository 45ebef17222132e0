"""The parser of `harness soak`; its work: harness/commands/soak.py."""

from __future__ import annotations

import argparse

from harness.commands.parsers import options
from harness.commands.parsers.options import SuiteCommand


class SoakCommand(SuiteCommand, name="soak", work="harness.commands.soak:run"):
    help = ("drift over serving time: one server, the suite's workload repeated for a set "
            "time with prefix caching on, accept length per window, and a gate on its trend")

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--duration", metavar="TIME",
                            help="how long the workload repeats: seconds, or with s, m or h "
                            "(e.g. 10m; default: the suite's soak.duration_s)")
        parser.add_argument("--window", metavar="TIME",
                            help="each window of serving time, at least two in the duration "
                            "(e.g. 1m; default: the suite's soak.window_s)")
        parser.add_argument("--max-drift", type=float, metavar="X",
                            help="tolerated fall of accept length over the run, a share of "
                            "it (default: the suite's soak.max_drift, else 0.05)")
        options.add_gate_options(
            parser, alpha_help="the drift gate's one-sided level (default 0.05)",
            inconclusive_help="how a drift neither shown within nor beyond the tolerance is "
            "judged (default: the suite's, else pass)")
        options.add_questions_option(
            parser, "questions in the repeated workload (default: the suite's)")
        options.add_results_and_build_options(parser)
        parser.add_argument("--server", metavar="URL",
                            help="soak a server someone else started (as `harness run "
                            "--server`): no launch, no kill; refused, naming the field, when "
                            "it does not serve what the suite declares. Its prefix cache is "
                            "as it was started")
        options.add_record_options(
            parser, label_help="a tag recorded with the soak and its run",
            dry_run_help="print the launch line and the soak's plan; run nothing",
            plot_help="draw no plot")
