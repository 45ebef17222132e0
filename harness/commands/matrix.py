"""`harness matrix [SUITES...]`: the nightly job matrix as JSON, grouped by runner label."""

from __future__ import annotations

import argparse
import json

from harness.ci.matrix import RUNNERS_FILE, build_matrix, load_runners, parse_builds
from harness.errors import ExitCode
from harness.suite.model import load_suite, shipped_suites


def run(args: argparse.Namespace) -> ExitCode:
    """`harness matrix` (its arguments: commands/parsers/matrix.py)."""
    specs = _split(args.suites) or shipped_suites()
    suites = [load_suite(spec) for spec in specs]
    if args.nightly_only:
        suites = [loaded for loaded in suites if loaded.suite.nightly]
    matrix = build_matrix(suites, load_runners(args.runners or RUNNERS_FILE),
                          builds=parse_builds(args.build))
    print(json.dumps(matrix, indent=2 if args.pretty else None))
    return ExitCode.PASS




def _split(specs: list[str]) -> list[str]:
    """Names may come space- or comma-separated in one argument (a workflow input)."""
    return [part for spec in specs for part in spec.replace(",", " ").split()]
