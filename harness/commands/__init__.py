"""CLI subcommands: one class per subcommand (asv style).

Each entry names `module:Class`; modules stay light at import time (heavy
libraries are imported inside `run`) so that `harness --help` is fast.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Protocol

from harness.files import RESULTS_DIR, RESULTS_ENV, default_results_dir

__all__ = ["COMMANDS", "RESULTS_DIR", "Command", "add_results_option", "run_by_id"]


class Command(Protocol):
    """One `harness` subcommand."""

    name: str
    help: str

    def add_arguments(self, parser: argparse.ArgumentParser) -> None: ...

    def run(self, args: argparse.Namespace) -> int: ...


def add_results_option(parser: argparse.ArgumentParser, help: str = "results folder") -> None:
    """`--results DIR`, the same flag and default in every command that reads or writes
    runs: $HARNESS_RESULTS when set, else ./results (`files.default_results_dir`)."""
    parser.add_argument("--results", type=Path, default=default_results_dir(), metavar="DIR",
                        help=f"{help} (default: ${RESULTS_ENV}, else ./{RESULTS_DIR})")


_RUN_ID = re.compile(r"^(?:\d{8}T\d{6}Z-)?([0-9a-f]{4,})$")


def run_by_id(selector: str, results: Path) -> Path | None:
    """The run folder a short id names (`e6cf2e4b`, a prefix of one of at least 4 hex
    digits, or the folder's own name), found with the results loader; None when the
    selector is an existing path, is not shaped like an id, or names a suite folder.
    BadInput when no run has the id, or several share the prefix (listed)."""
    match = _RUN_ID.match(selector)
    if match is None or Path(selector).exists():
        return None
    from harness.errors import BadInput
    from harness.results.layout import RUN_FILE
    from harness.results.store import load_runs

    if (Path(results) / "runs" / selector).is_dir():
        return None  # a suite of that name
    runs = load_runs(results, kind="run")
    found = runs[runs["run_id"].astype(str).str.startswith(match.group(1))] \
        if not runs.empty else runs
    folders = sorted({Path(p).parent if Path(p).name == RUN_FILE else Path(p)
                      for p in found["path"]})
    if len(folders) > 1:
        raise BadInput(f"{selector}: {len(folders)} runs under {results} have an id starting "
                       f"so: " + ", ".join(str(f) for f in folders[:10])
                       + "; give more of the id")
    if not folders:
        raise BadInput(f"{selector}: no run with that id under {results} (nor a suite of "
                       f"that name); a run's id ends its folder's name, as `harness run` "
                       f"prints it; --results names another results folder")
    return folders[0]


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
    "export": "harness.commands.export:ExportCommand",
    "trend": "harness.commands.trend:TrendCommand",
    "matrix": "harness.commands.matrix:MatrixCommand",
    "reference": "harness.commands.reference:ReferenceCommand",
    "bisect": "harness.commands.bisect:BisectCommand",
    "calibrate": "harness.commands.calibrate:CalibrateCommand",
    "paired": "harness.commands.paired:PairedCommand",
    "publish": "harness.commands.publish:PublishCommand",
    "sweep": "harness.commands.sweep:SweepCommand",
}
