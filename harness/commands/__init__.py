"""CLI subcommands: one class per subcommand (asv style).

Each entry names `module:Class`; modules stay light at import time (heavy
libraries are imported inside `run`) so that `harness --help` is fast.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Protocol

from harness.results.layout import RESULTS_DIR, RESULTS_ENV, default_results_dir

__all__ = ["COMMANDS", "RESULTS_DIR", "Command", "add_results_option"]


class Command(Protocol):
    """One `harness` subcommand."""

    name: str
    help: str

    def add_arguments(self, parser: argparse.ArgumentParser) -> None: ...

    def run(self, args: argparse.Namespace) -> int: ...


def add_results_option(parser: argparse.ArgumentParser, help: str = "results folder") -> None:
    """`--results DIR`, the same flag and default in every command that reads or writes
    runs: $HARNESS_RESULTS when set, else ./results (`layout.default_results_dir`)."""
    parser.add_argument("--results", type=Path, default=default_results_dir(), metavar="DIR",
                        help=f"{help} (default: ${RESULTS_ENV}, else ./{RESULTS_DIR})")


COMMANDS: dict[str, str] = {
    "list": "harness.commands.suites:ListCommand",
    "show": "harness.commands.suites:ShowCommand",
    "validate": "harness.commands.suites:ValidateCommand",
    "run": "harness.commands.run:RunCommand",
    "audit": "harness.commands.audit:AuditCommand",
    "power": "harness.commands.power:PowerCommand",
    "compare": "harness.commands.compare:CompareCommand",
    "ab": "harness.commands.ab:ABCommand",
    "plot": "harness.commands.plot:PlotCommand",
    "trend": "harness.commands.trend:TrendCommand",
    "matrix": "harness.commands.matrix:MatrixCommand",
    "reference": "harness.commands.reference:ReferenceCommand",
    "bisect": "harness.commands.bisect:BisectCommand",
    "calibrate": "harness.commands.calibrate:CalibrateCommand",
    "paired": "harness.commands.paired:PairedCommand",
    "publish": "harness.commands.publish:PublishCommand",
}
