"""`harness calibrate SUITE --runs N [--build SPEC]`: repeated runs, their spread, and a
suggested floor and tolerance (harness.protocols.calibrate)."""

from __future__ import annotations

import argparse
import json

from harness.builds import parse_build_spec
from harness.errors import BadInput, ExitCode
from harness.protocols.calibrate import calibrate
from harness.run.runner import RunOptions
from harness.suite.model import load_suite


def run(args: argparse.Namespace) -> ExitCode:
    """`harness calibrate` (its arguments: commands/parsers/calibrate.py)."""
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
        return ExitCode.PASS
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
    return ExitCode.PASS


