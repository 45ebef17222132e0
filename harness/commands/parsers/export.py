"""The parser of `harness export`; its work: harness/commands/export.py."""

from __future__ import annotations

import argparse

from harness.commands import Command
from harness.commands.parsers import options

DEFAULT_NAMES = {"aiperf": "profile_export.jsonl", "vllm-bench": "vllm_bench_serve.json"}


class ExportCommand(Command, name="export", work="harness.commands.export:run"):
    help = ("write a run in the shape users' tools read: per-request records as AIPerf's "
            "profile_export.jsonl, or the summary JSON `vllm bench serve --save-result` "
            "writes; acceptance named by its definition, units stated")

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("target", metavar="RUN_DIR", help="a run folder "
                            "(results/runs/SUITE/RUN) or a run's id (a unique prefix will do)")
        parser.add_argument("--format", required=True, choices=tuple(DEFAULT_NAMES),
                            help="aiperf: one JSON object per request (AIPerf's "
                            "MetricRecordInfo); vllm-bench: one summary JSON object")
        parser.add_argument("--out", metavar="PATH", help="write here (`-`: standard "
                            "output); default RUN_DIR/" + " or RUN_DIR/".join(
                                DEFAULT_NAMES.values()))
        options.add_results_option(parser, help="results folder a run id is looked up in")
