"""`harness ab SUITE --a SPEC --b SPEC`: run two engine builds one after the other, compare.

Each workload entry of the suite is compared on its own (its series), overall, per
category and per draft position, paired by question. A side that ended in an error or
before its plan (a crashed server keeps a partial measurement) is no comparison: exit 3,
naming the side and its reasons, before any table (README, exit codes).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from harness.analysis.compare import Comparison, Side, add_run, compare, render
from harness.builds import parse_build_spec
from harness.errors import BadInput, EngineError, ExitCode, TopologySkip
from harness.run import runner
from harness.run.judge import DropEvidence, decide_drop
from harness.run.runner import RunOptions
from harness.suite.model import load_suite, suite_entries

if TYPE_CHECKING:
    from harness.run.outcome import RunOutcome
    from harness.suite.model import LoadedSuite


def run(args: argparse.Namespace) -> int:
    """`harness ab` (its arguments: commands/parsers/ab.py)."""
    loaded = load_suite(args.suite)
    loaded_b = load_suite(args.b_suite) if args.b_suite else loaded
    _same_workloads(loaded, loaded_b)
    for spec, flag, suite in ((args.a, "--a", loaded), (args.b, "--b", loaded_b)):
        parse_build_spec(spec, engine=suite.suite.engine.kind, flag=flag)  # before runs
    sides: list[dict[str, Side]] = []  # per build: series -> side
    broken: list[str] = []
    for spec, label, side_suite in ((args.a, args.label_a, loaded),
                                    (args.b, args.label_b, loaded_b)):
        # Both sides are measured even when one breaks the draft's attention contract
        # (pre-fix builds do): the record notes the differences.
        options = RunOptions(results_dir=args.results, sglang=spec, label=label,
                             engine_python=args.engine_python,
                             enforce_contract=False)  # fmt: skip
        outcome = runner.run_suite(side_suite, options)  # looked up at the call: tests replace it
        if outcome.status == "skipped":  # the host does not fit: exit 4, as `run` says
            raise TopologySkip(f"build {label} ({spec}): " + "; ".join(outcome.reasons))
        sides.append({series: side for series, side in _sides(outcome, label, spec)})
        broken += _broken(outcome, label, spec)
    if broken:
        raise EngineError("no comparison of a crashed or partial run: " + "; ".join(broken))
    if args.b_suite:  # another suite: its entries pair with A's in order
        sides[1] = dict(zip(sides[0], sides[1].values(), strict=False))
    results: dict[str, Comparison] = {}
    for series, side_a in sides[0].items():
        if series in sides[1]:
            results[series] = compare(side_a, sides[1][series])
    if not results:
        raise EngineError("the two builds share no measured workload entry")
    if args.json:
        only = next(iter(results.values())) if len(results) == 1 else {"entries": results}
        print(json.dumps(only, indent=2, default=str))
    else:
        for series, result in results.items():
            if len(results) > 1:
                print(f"\n== {series}")
            render(result)
    if not args.fail_on_drop:
        return int(ExitCode.PASS)
    judged = decide_drop([DropEvidence(series, result["difference"]["p_drop"],
                                       _alpha(loaded, series),
                                       result["difference"]["method"])
                          for series, result in results.items()])
    print(f"--fail-on-drop: {judged.verdict.status.upper()}: "
          + "; ".join(judged.verdict.reasons), file=sys.stderr)
    return int(judged.exit_code)




def _sides(outcome: RunOutcome, label: str, spec: str) -> list[tuple[str, Side]]:
    """One comparison side per workload entry the build measured (its request rows kept
    for the per-category and per-position breakdowns)."""
    sides = []
    for entry in outcome.entries or [outcome]:
        record = entry.record
        if entry.run_dir is None or record is None or record.verdict is None:
            raise EngineError(f"build {label} ({spec}) produced no record "
                              f"(exit {int(entry.exit_code)})")  # fmt: skip
        if record.measurement is None:
            raise EngineError(f"build {label} ({spec}) measured nothing for "
                              f"{record.suite.name}: " + "; ".join(record.verdict.reasons))
        print(f"{label}: {record.verdict.status.upper()} {record.suite.name} record "
              f"{entry.run_dir}")
        side = Side(name=f"{label} ({spec})")
        add_run(side, Path(entry.run_dir))  # its request rows kept (`Side.rows`)
        sides.append((record.suite.name, side))
    return sides


def _broken(outcome: RunOutcome, label: str, spec: str) -> list[str]:
    """One line per workload entry of a build whose run ended in an error or is partial."""
    lines = []
    for entry in outcome.entries or [outcome]:
        record = entry.record
        if record is None or record.verdict is None or record.measurement is None:
            continue  # refused by `_sides` first: no record, or nothing measured
        measurement = record.measurement
        if record.verdict.status == "error" or measurement.partial:
            done = (f", {measurement.n_requests} of {measurement.n_planned} requests"
                    if measurement.partial else "")
            lines.append(f"build {label} ({spec}) {record.suite.name}: "
                         f"{record.verdict.status}{done} ("
                         + "; ".join(record.verdict.reasons[:1]) + ")")
    return lines


def _same_workloads(a: LoadedSuite, b: LoadedSuite) -> None:
    """Two suites compared question by question must send the same workloads."""
    keys = ("workload", "workloads")
    if [a.document.get(k) for k in keys] != [b.document.get(k) for k in keys]:
        raise BadInput(f"--b-suite {b.path}: its workloads differ from {a.path}'s; a "
                       "comparison by question needs the same prompts and settings")


def _alpha(loaded: LoadedSuite, series: str) -> float:
    for entry in suite_entries(loaded):
        if entry.series == series:
            return entry.loaded.suite.floors.alpha
    return loaded.suite.floors.alpha
