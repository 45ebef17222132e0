"""`harness compare A B`: two runs, two sets of runs, or a run and a baseline."""

from __future__ import annotations

import argparse
import json
import sys

from harness.analysis.compare import compare, render, resolve_side
from harness.analysis.paired_report import finding_line, stored_finding
from harness.commands.run_ids import run_by_id
from harness.errors import BadInput, ExitCode
from harness.run.judge import DropEvidence, decide_drop


def run(args: argparse.Namespace) -> int:
    """`harness compare` (its arguments: commands/parsers/compare.py)."""
    if not 0.0 < args.level < 1.0:
        raise BadInput(f"--level must be in (0, 1), got {args.level}")
    if not 0.0 < args.alpha < 1.0:
        raise BadInput(f"--alpha must be in (0, 1), got {args.alpha}")
    sides = []
    for selector in (args.a, args.b):
        folder = run_by_id(selector, args.results)
        side = resolve_side(str(folder) if folder else selector, args.results,
                            args.include_incomplete)
        if folder is not None:
            side.name = selector  # the id the user gave names the side
        sides.append(side)
    for side in sides:
        if side.note:
            print(side.note, file=sys.stderr)
    result = compare(sides[0], sides[1], level=args.level)
    findings = {name: found for name, side in zip("ab", sides, strict=True)
                if (found := stored_finding(side)) is not None}
    if findings:
        # as recorded by `harness run --against`
        result["paired_gate"] = {name: found.model_dump(mode="json")
                                 for name, found in findings.items()}
    if args.json:
        print(json.dumps(result, indent=2, default=str))
    else:
        render(result)
        for name, found in findings.items():
            print(f"{name.upper()}'s record: {finding_line(found)}")
    if not args.fail_on_drop:
        return int(ExitCode.PASS)
    judged = decide_drop([DropEvidence("B - A", result["difference"]["p_drop"], args.alpha,
                                       result["difference"]["method"])])
    print(f"--fail-on-drop: {judged.verdict.status.upper()}: "
          + "; ".join(judged.verdict.reasons), file=sys.stderr)
    return int(judged.exit_code)


