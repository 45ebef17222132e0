"""Each command is a light parser (`harness/commands/parsers/`) that names its work
("module:function", `Command.work`), imported only when the command runs: every name
resolves to a function of a `harness.commands` module, and running a command calls it."""

from __future__ import annotations

import argparse
import importlib
import inspect

import pytest

from harness.cli import load_command
from harness.commands import COMMANDS, Command


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_the_work_a_command_names_exists(name: str) -> None:
    command = load_command(COMMANDS[name])
    assert command is not None and command.name == name
    assert COMMANDS[name].startswith("harness.commands.parsers.")
    module_name, _, function = command.work.partition(":")
    assert module_name.startswith("harness.commands.") and "parsers" not in module_name
    work = getattr(importlib.import_module(module_name), function)
    assert inspect.isfunction(work)
    assert list(inspect.signature(work).parameters) == ["args"]


def test_running_a_command_calls_its_work(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[argparse.Namespace] = []
    module = importlib.import_module("harness.commands.listing")
    monkeypatch.setattr(module, "run", lambda args: seen.append(args) or 3)

    class Listing(Command):
        name = "list"
        help = "test"
        work = "harness.commands.listing:run"

    args = argparse.Namespace(suites_dir=None)
    assert Listing().run(args) == 3 and seen == [args]
