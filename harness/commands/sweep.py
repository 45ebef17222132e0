"""`harness sweep SUITE --concurrency 1,4,16`: accept length and speed at each concurrency,
on one launch, each point a run record; `--max-drop X` gates each point against
concurrency 1 (harness.protocols.sweep)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from harness.analysis.sweep_plot import plot_sweep
from harness.commands.protocol_runs import print_report, run_options
from harness.errors import BadInput
from harness.metrics.latency import speed_lines
from harness.metrics.speedup import speedup_lines
from harness.protocols.sweep import GateSettings, check_gate, parse_concurrencies, run_sweep
from harness.suite.model import load_suite

if TYPE_CHECKING:
    from harness.protocols.sweep import SweepOutcome


def run(args: argparse.Namespace) -> int:
    """`harness sweep` (its arguments: commands/parsers/sweep.py)."""
    concurrencies = parse_concurrencies(args.concurrency)
    if args.max_drop is None and (args.alpha != 0.05 or args.inconclusive != "pass"):
        raise BadInput("--alpha and --inconclusive set the gate: give --max-drop too")
    gate = None if args.max_drop is None else GateSettings(args.max_drop, args.alpha,
                                                           args.inconclusive)
    check_gate(gate, concurrencies)  # before the suite is read: a flag's own error
    loaded = load_suite(args.suite)
    swept = run_sweep(loaded, concurrencies, run_options(args, loaded, args.dry_run), gate)
    if args.dry_run:
        return print_report(swept.plan, swept.exit_code)
    drawn = not args.no_plot and any(point.record is not None and
                                     point.record.measurement is not None
                                     for point in swept.points)
    return print_report(report_lines(swept), swept.exit_code, swept.folder,
                        plot_sweep if drawn else None)




def report_lines(swept: SweepOutcome) -> list[str]:
    """Per point: its verdict, accept length (definition, CI), record and speed; then
    the gate's findings and the sweep's status."""
    record = swept.record
    lines = [f"accept length: {record.metric} definition: {record.definition}",
             "speed: definitions in each record's measurement.latency.definitions "
             "(docs/speed.md)"]
    for point in swept.points:
        head = f"concurrency {point.concurrency}: {point.status.upper()}"
        measurement = point.record.measurement if point.record else None
        if measurement is not None and not measurement.partial:
            ci = measurement.accept_length_ci
            shown = f" (95% CI {ci[0]:.4f}-{ci[1]:.4f})" if ci else " (no CI)"
            head += (f"  accept length ({measurement.metric}) "
                     f"{measurement.accept_length:.4f}{shown}, {measurement.n_prompts} prompts")
        lines.append(head)
        if point.status != "pass":
            lines += [f"  {reason}" for reason in point.reasons]
        if point.run_dir is not None:
            lines.append(f"  record: {point.run_dir}")
        if measurement is not None and measurement.latency is not None:
            lines += [f"  {line}" for line in speed_lines(measurement.latency)]
        if measurement is not None and measurement.speedup is not None:
            lines += [f"  {line}" for line in speedup_lines(measurement.speedup)]
    if record.gate is not None:
        lines.append(f"gate: accept length at each concurrency within {record.gate.max_drop:.1%} "
                     f"of concurrency 1's, paired by prompt (A: concurrency 1, B: the point)")
        for finding in record.gate.findings:
            gate_lines = [r for r in finding.reasons if r.startswith(("relative gate",
                                                                      "no gate"))]
            others = [r for r in finding.reasons if r not in gate_lines]
            for reason in gate_lines or finding.reasons:
                lines.append(f"concurrency {finding.concurrency}: {reason}")
            if finding.status != "pass":
                lines += [f"  {reason}" for reason in others]
    lines.append(f"sweep: {record.status.upper()}")
    lines += [f"  {reason}" for reason in record.reasons]
    if swept.folder is not None:
        lines.append(f"sweep record: {Path(swept.folder) / 'sweep.json'}")
    return lines
