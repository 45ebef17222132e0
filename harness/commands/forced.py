"""`harness forced SUITE --ladder 1,real,4,8`: speed with the acceptance forced at each
accept length (harness.protocols.forced), its record and plot."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.analysis.forced_plot import plot_forced
from harness.commands.protocol_runs import print_report, run_options
from harness.errors import BadInput
from harness.protocols.forced import ForcedOutcome, check_knob, parse_ladder, run_forced
from harness.protocols.forced_split import check_split, run_split
from harness.results.forced import FORCED_FILE
from harness.suite.model import load_suite


def run(args: argparse.Namespace) -> int:
    """`harness forced` (its arguments: commands/parsers/forced.py)."""
    if args.questions is not None and args.questions < 1:
        raise BadInput(f"--questions {args.questions}: at least 1 question a point")
    loaded = load_suite(args.suite)
    options = run_options(args, loaded, dry_run=False)
    _, block = check_knob(loaded.suite, args.sglang)
    if args.against is not None:
        check_split(loaded, args.sglang, args.against)
    ladder = parse_ladder(args.ladder if args.ladder is not None else f"1,real,{block}", block)
    against = None
    if args.against is not None:
        both = run_split(loaded, ladder, options, args.against, args.questions)
        against, found = both.against, both.found
        print(f"reference build {args.against}:")
        for line in report_lines(against):
            print(f"  {line}")
        print(f"build under test {args.sglang or 'engine.default_build'}:")
    else:
        found = run_forced(loaded, ladder, options, args.questions)
    reference = against.record if against else None
    drawn = not args.no_plot and any(point.speedup_tpot is not None
                                     for point in found.record.points)
    return print_report(report_lines(found), found.exit_code, found.folder,
                        (lambda folder: plot_forced(folder, found.record, reference))
                        if drawn else None)


def report_lines(found: ForcedOutcome) -> list[str]:
    record = found.record
    lines = [f"forced acceptance: {record.knob}",
             f"accept length: {record.metric} ({record.definitions['achieved']})",
             "speedup: over the target alone, definitions in forced.json's definitions"]
    for point in record.points:
        name = "real run" if point.forced is None else f"forced {point.forced:g}"
        achieved = "-" if point.achieved is None else f"{point.achieved:.4f}"
        tpot = "-" if point.speedup_tpot is None else f"{point.speedup_tpot:.3f}x"
        throughput = "-" if point.speedup_throughput is None \
            else f"{point.speedup_throughput:.3f}x"
        lines.append(f"{name:>12}: {point.status.upper()}  achieved {achieved}  "
                     f"speedup_tpot {tpot}  speedup_throughput {throughput}")
        if point.status != "pass":
            lines += [f"    {reason}" for reason in point.reasons]
        if point.run_dir is not None:
            lines.append(f"    record: {point.run_dir}")
    for found_even in record.break_even:
        if found_even.accept_length is None:  # its note begins "none in range"
            lines.append(f"break-even ({found_even.figure}): {found_even.note}")
        else:
            lines.append(f"break-even ({found_even.figure}): {found_even.accept_length:.3f} "
                         f"({found_even.note})")
    split = record.split
    if split is not None:
        lines.append(f"split against {split.against_spec} (ladder {split.against_forced_id}): "
                     f"{split.status.upper()}")
        lines += [f"    {reason}" for reason in split.reasons]
    lines.append(f"forced: {record.status.upper()}")
    if found.folder is not None:
        lines.append(f"forced record: {Path(found.folder) / FORCED_FILE}")
    return lines
