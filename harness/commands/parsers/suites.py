"""The parsers of `harness list`, `show` and `validate`; their work: commands/listing.py
(list), commands/suites.py (show, validate)."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.commands import Command
from harness.commands.parsers.options import (
    add_json_option,
    add_results_option,
    add_suite_argument,
)


class ListCommand(Command):
    name = "list"
    help = "list the shipped suites"
    work = "harness.commands.listing:run"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--suites-dir", type=Path, default=None,
                            help="folder of suite TOML files (default: the shipped suites/)")


class ShowCommand(Command):
    name = "show"
    help = "show a suite as validated, with defaults filled in"
    work = "harness.commands.suites:show"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        add_suite_argument(parser)
        add_json_option(parser, "print JSON")
        add_results_option(parser, "where calibration records are looked for")


class ValidateCommand(Command):
    name = "validate"
    help = ("validate suite files as a run's preparation checks them (fields, entries, "
            "engine flags); exit 2 naming each bad field")
    work = "harness.commands.suites:validate"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("paths", nargs="+", type=Path, help="suite files or folders")
