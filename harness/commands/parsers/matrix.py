"""The parser of `harness matrix`; its work: harness/commands/matrix.py."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.commands import Command


class MatrixCommand(Command, name="matrix", work="harness.commands.matrix:run"):
    help = (
        'print a GitHub Actions job matrix ({"include": [...]}) placing each suite on the '
        "runner label its topology needs (ci/runners.toml)"
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "suites",
            nargs="*",
            metavar="SUITE",
            help="suite files or names (default: every suite in suites/)",
        )
        parser.add_argument(
            "--nightly-only", action="store_true", help="only suites with `nightly = true`"
        )
        parser.add_argument(
            "--runners",
            type=Path,
            default=None,
            metavar="FILE",
            help="runner config (default: ci/runners.toml)",
        )
        parser.add_argument("--build", action="append", default=[], metavar="LABEL=SPEC",
                            help="one job per build for every SGLang suite, labelled "
                            "(e.g. main=git+...@<sha>#subdirectory=python); repeatable")
        parser.add_argument("--pretty", action="store_true", help="indented JSON")
