"""`harness compare A B`: two runs, two sets of runs, or a run and a baseline."""

from __future__ import annotations

import argparse

from harness.commands import add_results_option


class CompareCommand:
    name = "compare"
    help = "compare two runs or sets of runs: accept length with CI, difference, p-value"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        from harness.compare import SELECTOR_HELP

        parser.formatter_class = argparse.RawDescriptionHelpFormatter
        parser.epilog = (
            SELECTOR_HELP + "\n\nThe difference is B - A; with --fail-on-drop the exit code is 1 "
            "when B is significantly below A (one-sided, at --alpha)."
        )
        parser.add_argument("a", help="side A (see below)")
        parser.add_argument("b", help="side B (see below)")
        add_results_option(parser, "results folder for suite selectors (default: ./results)")
        parser.add_argument("--level", type=float, default=0.95, help="CI level (default 0.95)")
        parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
        parser.add_argument("--fail-on-drop", action="store_true",
                            help="exit 1 when B's accept length is significantly below A's")
        parser.add_argument("--alpha", type=float, default=0.05,
                            help="level of the drop test for --fail-on-drop (default 0.05)")

    def run(self, args: argparse.Namespace) -> int:
        import json
        import math

        from harness.compare import compare, render, resolve_side
        from harness.errors import BadInput

        if not 0.0 < args.level < 1.0:
            raise BadInput(f"--level must be in (0, 1), got {args.level}")
        result = compare(resolve_side(args.a, args.results), resolve_side(args.b, args.results),
                         level=args.level)  # fmt: skip
        if args.json:
            print(json.dumps(result, indent=2, default=str))
        else:
            render(result)
        p_drop = result["difference"]["p_drop"]
        if args.fail_on_drop and not math.isnan(p_drop) and p_drop < args.alpha:
            return 1
        return 0
