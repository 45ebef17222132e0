"""`harness compare A B`: two runs, two sets of runs, or a run and a baseline."""

from __future__ import annotations

import argparse

from harness.commands import add_results_option

SELECTOR_HELP = """\
A side is one of:
  RUN_DIR or RUN_DIR/run.json     one run folder
  RUN_ID                          the run with that id in --results (e6cf2e4b, the
                                  folder name's end; a unique prefix of 4+ digits will do)
  'results/runs/SUITE/2025*'      a glob of run folders (quote it): a pooled set;
                                  unusable folders are reported and skipped
  SUITE or SUITE@latest           the latest complete run of SUITE in --results with a figure
  SUITE@previous                  the one before it (errored, partial and unmeasured
                                  runs passed over; see --include-incomplete)
  SUITE@LABEL                     every run of SUITE labelled LABEL (a pooled set)
  baseline:SUITE@LABEL            a baseline record (a fixed figure, no per-request data)
  FILE.json                       a baseline record file"""


class CompareCommand:
    name = "compare"
    help = "compare two runs or sets of runs: accept length with CI, difference, p-value"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.formatter_class = argparse.RawDescriptionHelpFormatter
        parser.epilog = (
            SELECTOR_HELP + "\n\nThe difference is B - A, under the accept-length definition "
            "both sides give\n(server_avg or per_request); with --fail-on-drop the exit code "
            "is 1 when B is\nsignificantly below A (one-sided, at --alpha), 3 when no drop "
            "test can be made\n(figures only, too few questions)."
        )
        parser.add_argument("a", help="side A (see below)")
        parser.add_argument("b", help="side B (see below)")
        add_results_option(parser, "results folder for suite selectors")
        parser.add_argument("--level", type=float, default=0.95, help="CI level (default 0.95)")
        parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
        parser.add_argument("--fail-on-drop", action="store_true",
                            help="exit 1 when B's accept length is significantly below A's")
        parser.add_argument("--alpha", type=float, default=0.05,
                            help="level of the drop test for --fail-on-drop (default 0.05)")
        parser.add_argument("--include-incomplete", action="store_true",
                            help="SUITE selectors also take runs that errored or ended before "
                            "their plan (partial; marked in the note); by default they are "
                            "passed over")

    def run(self, args: argparse.Namespace) -> int:
        import json
        import sys

        from harness.analysis.compare import compare, render, resolve_side
        from harness.errors import BadInput, ExitCode
        from harness.run.judge import DropEvidence, decide_drop

        if not 0.0 < args.level < 1.0:
            raise BadInput(f"--level must be in (0, 1), got {args.level}")
        if not 0.0 < args.alpha < 1.0:
            raise BadInput(f"--alpha must be in (0, 1), got {args.alpha}")
        from harness.commands import run_by_id

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
        result = compare(*sides, level=args.level)
        from harness.analysis.paired_report import finding_line, stored_finding

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
