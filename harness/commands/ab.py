"""`harness ab SUITE --a SPEC --b SPEC`: run two engine builds one after the other, compare."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.commands import add_results_option


class ABCommand:
    name = "ab"
    help = "run a suite on two engine builds (e.g. pre-fix vs post-fix) and compare them"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("suite", help="suite file or name")
        parser.add_argument("--a", required=True, metavar="SPEC",
                            help="build A (e.g. sglang==0.5.17, git URL@ref, local checkout; "
                            "for a reference-engine suite reference:policy=regressed,noise=0)")
        parser.add_argument("--b", required=True, metavar="SPEC", help="build B")
        parser.add_argument("--label-a", default="a", help="label recorded with run A")
        parser.add_argument("--label-b", default="b", help="label recorded with run B")
        add_results_option(parser)
        parser.add_argument("--engine-python", metavar="PATH",
                            help="interpreter of the reference engine's environment")
        parser.add_argument("--json", action="store_true", help="print the comparison as JSON")
        parser.add_argument("--fail-on-drop", action="store_true",
                            help="exit 1 when B is significantly below A (at the suite's alpha)")

    def run(self, args: argparse.Namespace) -> int:
        import json
        import math

        from harness.build import parse_build_spec
        from harness.compare import Side, add_run, compare, render
        from harness.errors import EngineError, ExitCode
        from harness.runner import RunOptions, run_suite
        from harness.suite import load_suite

        loaded = load_suite(args.suite)
        for spec, flag in ((args.a, "--a"), (args.b, "--b")):  # both parse before either runs
            parse_build_spec(spec, engine=loaded.suite.engine.kind, flag=flag)
        sides = []
        for spec, label in ((args.a, args.label_a), (args.b, args.label_b)):
            # Both sides are measured even when one breaks the draft's attention contract
            # (pre-fix builds do): the record notes the differences.
            options = RunOptions(results_dir=args.results, sglang=spec, label=label,
                                 engine_python=args.engine_python,
                                 enforce_contract=False)  # fmt: skip
            outcome = run_suite(loaded, options)
            if outcome.run_dir is None or outcome.record is None:
                raise EngineError(f"build {label} ({spec}) produced no record "
                                  f"(exit {int(outcome.exit_code)})")  # fmt: skip
            if outcome.record.measurement is None:
                raise EngineError(f"build {label} ({spec}) measured nothing: "
                                  + "; ".join(outcome.record.verdict.reasons))  # fmt: skip
            print(f"{label}: {outcome.record.verdict.status.upper()} record {outcome.run_dir}")
            side = Side(name=f"{label} ({spec})")
            add_run(side, Path(outcome.run_dir))
            sides.append(side)
        result = compare(sides[0], sides[1])
        if args.json:
            print(json.dumps(result, indent=2, default=str))
        else:
            render(result)
        alpha = getattr(loaded.suite.floors, "alpha", 0.05)
        p_drop = result["difference"]["p_drop"]
        if args.fail_on_drop and not math.isnan(p_drop) and p_drop < alpha:
            return int(ExitCode.BELOW_FLOOR)
        return int(ExitCode.PASS)
