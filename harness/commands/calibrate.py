"""`harness calibrate SUITE --runs N [--build SPEC]`: repeated runs, their spread, and a
suggested floor and tolerance (harness.run.calibrate)."""

from __future__ import annotations

import argparse

from harness.commands import add_results_option


class CalibrateCommand:
    name = "calibrate"
    help = "repeat a suite's runs on one build: run-to-run spread, suggested floor and tolerance"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("suite", help="suite file or name")
        parser.add_argument("--runs", type=int, required=True, metavar="N",
                            help="repeats (>= 2; each a fresh launch)")
        parser.add_argument("--build", "--sglang", dest="sglang", metavar="SPEC",
                            help="build to calibrate (the same grammar as `harness run`)")
        parser.add_argument("--entry", action="append", dest="entries", metavar="NAME",
                            help="calibrate only this workload entry (repeatable)")
        add_results_option(parser)
        parser.add_argument("--engine-python", metavar="PATH",
                            help="interpreter of the reference engine's environment")
        parser.add_argument("--json", action="store_true", help="print the record as JSON")

    def run(self, args: argparse.Namespace) -> int:
        import json

        from harness.build import parse_build_spec
        from harness.errors import BadInput
        from harness.run.calibrate import calibrate
        from harness.run.runner import RunOptions
        from harness.suite.model import load_suite

        if args.runs < 2:
            raise BadInput(f"--runs must be >= 2 (a spread needs two runs), got {args.runs}")
        loaded = load_suite(args.suite)
        if args.sglang is not None:
            parse_build_spec(args.sglang, engine=loaded.suite.engine.kind, flag="--build")
        options = RunOptions(results_dir=args.results, sglang=args.sglang, plot=False,
                             progress=False, engine_python=args.engine_python,
                             entries=args.entries)
        path, record = calibrate(loaded, options, args.runs)
        if args.json:
            print(json.dumps(record, indent=2, default=str))
            return 0
        print(f"calibration {record['calibration_id']}: {record['n_runs']} runs "
              f"({record['protocol']})")
        for series, s in record["series"].items():
            figures = ", ".join(f"{f:.4f}" for f in s["figures"])
            print(f"  {series} ({record['metric']}): {figures}")
            print(f"    mean {s['mean']:.4f}, run-to-run sd {s['run_sd']:.4f}, within-run se "
                  f"{s['within_se']:.4f}, paired sd between repeats {s['paired_sd']:.4f}"
                  + (" (identical answers)" if s["identical_answers"] else ""))
            print(f"    suggested floor {s['suggested_floor']:g}: {s['floor_rule']}")
            print(f"    suggested relative_drop {s['suggested_relative_drop']:g}: "
                  f"{s['tolerance_rule']}")
            aa = s["p_fail_if_equal"]
            print(f"    P(gate fails | B = A) at {s['n_questions']} questions: "
                  f"{aa['pass']:.3f} with inconclusive = 'pass', {aa['fail']:.3f} with 'fail'")
        print(f"record: {path}")
        print("declare it in the suite (per series, its suggested_gate):")
        for series, s in record["series"].items():
            g = s["suggested_gate"]
            print(f"  {series}: [gate] relative_drop = {g['relative_drop']:g}, paired_sd = "
                  f"{g['paired_sd']:g}, inconclusive = \"{g['inconclusive']}\", "
                  f"calibration = \"calibration: {record['calibration_id']}\"")
        return 0
