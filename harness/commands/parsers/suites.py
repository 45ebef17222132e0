"""The parsers of `harness list`, `show` and `validate`; their work: commands/listing.py
(list), commands/suites.py (show, validate)."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.commands import Command
from harness.commands.parsers import options
from harness.commands.parsers.options import SuiteCommand


class ListCommand(Command, name="list", work="harness.commands.listing:run"):
    help = "list the shipped suites"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--suites-dir", type=Path, default=None,
                            help="folder of suite TOML files (default: the shipped suites/)")


class ShowCommand(SuiteCommand, name="show", work="harness.commands.suites:show"):
    help = "show a suite as validated, with defaults filled in"
    suite_help = options.SUITE_HELP

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        options.add_json_option(parser, "print JSON")
        options.add_results_option(parser, "where calibration records are looked for")


class ValidateCommand(Command, name="validate", work="harness.commands.suites:validate"):
    help = ("validate suite files as a run's preparation checks them (fields, entries, "
            "engine flags); exit 2 naming each bad field")

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("paths", nargs="+", type=Path, help="suite files or folders")
