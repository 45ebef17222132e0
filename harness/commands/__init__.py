"""CLI subcommands: one class per subcommand (asv style), in two halves.

- `harness/commands/parsers/NAME.py`: the command's class (its name, help and arguments),
  light: `harness --help` builds every parser, and imports no heavy library
  (tests/test_cli_startup.py).
- `harness/commands/NAME.py`: the work, its imports at the top; `Command.work` names it
  ("module:function"), and it is imported only when the command runs. This is the one
  place a command's dependencies load late.
- `harness/commands/parsers/options.py`: the arguments several commands take alike.

`COMMANDS` names each command's class (`module:Class`).
"""

from __future__ import annotations

import argparse
import importlib
from typing import ClassVar

__all__ = ["COMMANDS", "Command"]


class Command:
    """One `harness` subcommand: its parser, and the function that does its work.

    A command names itself and its work in its class line,
    `class RunCommand(Command, name="run", work="harness.commands.run:run")`, and sets
    `help` in its body."""

    name: ClassVar[str]
    help: ClassVar[str]
    work: ClassVar[str]
    """"module:function" taking the parsed arguments and returning the exit code; the
    module is imported when the command runs, not when its parser is built."""

    def __init_subclass__(cls, *, name: str | None = None, work: str | None = None) -> None:
        super().__init_subclass__()
        if name is not None:
            cls.name = name
        if work is not None:
            cls.work = work

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """The command's arguments (none by default)."""

    def run(self, args: argparse.Namespace) -> int:
        module, _, function = self.work.partition(":")
        return int(getattr(importlib.import_module(module), function)(args))


COMMANDS: dict[str, str] = {
    "list": "harness.commands.parsers.suites:ListCommand",
    "show": "harness.commands.parsers.suites:ShowCommand",
    "validate": "harness.commands.parsers.suites:ValidateCommand",
    "run": "harness.commands.parsers.run:RunCommand",
    "audit": "harness.commands.parsers.audit:AuditCommand",
    "power": "harness.commands.parsers.power:PowerCommand",
    "compare": "harness.commands.parsers.compare:CompareCommand",
    "ab": "harness.commands.parsers.ab:ABCommand",
    "plot": "harness.commands.parsers.plot:PlotCommand",
    "export": "harness.commands.parsers.export:ExportCommand",
    "trend": "harness.commands.parsers.trend:TrendCommand",
    "matrix": "harness.commands.parsers.matrix:MatrixCommand",
    "reference": "harness.commands.parsers.reference:ReferenceCommand",
    "references": "harness.commands.parsers.references:ReferencesCommand",
    "bisect": "harness.commands.parsers.bisect:BisectCommand",
    "calibrate": "harness.commands.parsers.calibrate:CalibrateCommand",
    "paired": "harness.commands.parsers.paired:PairedCommand",
    "publish": "harness.commands.parsers.publish:PublishCommand",
    "sweep": "harness.commands.parsers.sweep:SweepCommand",
    "forced": "harness.commands.parsers.forced:ForcedCommand",
    "grid": "harness.commands.parsers.grid:GridCommand",
    "soak": "harness.commands.parsers.soak:SoakCommand",
}
