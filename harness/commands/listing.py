"""`harness list`: the shipped suites, one line each, from their cached listing (light:
`harness list` imports no heavy library when the cache is fresh, tests/test_cli_startup.py)."""

from __future__ import annotations

import argparse
import shutil
import sys

from harness.errors import ExitCode
from harness.files import SUITES_DIR
from harness.run.exit_codes import input_exit
from harness.suite.listing import format_rows, listing


def run(args: argparse.Namespace) -> ExitCode:
    """`harness list` (its arguments: commands/parsers/suites.py)."""
    folder = args.suites_dir or SUITES_DIR
    entries = listing(sorted(folder.glob("*.toml")), folder)
    # a terminal's width wraps the description; a pipe gets one line per suite
    width = shutil.get_terminal_size().columns if sys.stdout.isatty() else None
    for line in format_rows(entries, width):
        print(line)
    return input_exit(any(bad for _, bad in entries))
