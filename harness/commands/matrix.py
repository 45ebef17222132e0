"""`harness matrix [SUITES...]`: the nightly job matrix as JSON, grouped by runner label."""

from __future__ import annotations

import argparse
from pathlib import Path


class MatrixCommand:
    name = "matrix"
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

    def run(self, args: argparse.Namespace) -> int:
        import json

        from harness.ci.matrix import RUNNERS_FILE, build_matrix, load_runners, parse_builds
        from harness.suite.model import load_suite, shipped_suites

        specs = _split(args.suites) or shipped_suites()
        suites = [load_suite(spec) for spec in specs]
        if args.nightly_only:
            suites = [loaded for loaded in suites if loaded.suite.nightly]
        matrix = build_matrix(suites, load_runners(args.runners or RUNNERS_FILE),
                              builds=parse_builds(args.build))
        print(json.dumps(matrix, indent=2 if args.pretty else None))
        return 0


def _split(specs: list[str]) -> list[str]:
    """Names may come space- or comma-separated in one argument (a workflow input)."""
    return [part for spec in specs for part in spec.replace(",", " ").split()]
