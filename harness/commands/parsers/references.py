"""The parser of `harness references`; its work: harness/commands/references.py."""

from __future__ import annotations

import argparse

from harness.commands import Command


class ReferencesCommand(Command, name="references", work="harness.commands.references:run"):
    help = ("list the published accept-length figures and test thresholds suites cite, each "
            "with its source, pair, hardware, engine, protocol and definition; --protocols: "
            "the named protocols")

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("ids", nargs="*", metavar="ID",
                            help="reference (or, with --protocols, protocol) ids; default: all")
        parser.add_argument("--protocols", action="store_true",
                            help="list the protocols: what each fixes, its source and rule")
        parser.add_argument("--json", action="store_true", help="print JSON")
