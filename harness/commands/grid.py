"""`harness grid SUITE`: the suite's [grid] measured cell by cell, each cell a run record,
a launch per prefix-caching setting; the grid's record, heatmap and gate
(harness.protocols.grid)."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.analysis.grid_plot import plot_grid
from harness.commands.protocol_runs import print_report, run_options
from harness.protocols.grid import GridOutcome, run_grid
from harness.suite.model import load_suite


def run(args: argparse.Namespace) -> int:
    """`harness grid` (its arguments: commands/parsers/grid.py)."""
    loaded = load_suite(args.suite)
    outcome = run_grid(loaded, run_options(args, loaded, args.dry_run))
    if args.dry_run:
        return print_report(outcome.plan, outcome.exit_code)
    drawn = not args.no_plot and any(cell.accept_length is not None
                                     for cell in outcome.record.cells)
    return print_report(report_lines(outcome), outcome.exit_code, outcome.folder,
                        plot_grid if drawn else None)


def report_lines(outcome: GridOutcome) -> list[str]:
    """The definitions, each launch, then per cell its verdict, accept length (definition,
    CI), speedups and record; the gate's findings; the grid's status."""
    record = outcome.record
    lines = [f"accept length: {record.metric} definition: {record.definition}"]
    lines += [f"speedup {name}: {text}" for name, text in record.speedup_definitions.items()]
    lines += [f"tier {tier.label}" for tier in record.tiers]
    for number, launch in enumerate(record.launches, start=1):
        flags = " ".join(launch.flags) or "no flag added"
        said = f"prefix caching {launch.prefix_caching} ({flags})" if launch.prefix_caching \
            else "the engine's own prefix-cache default"
        lines.append(f"launch {number}: {said}: {len(launch.cells)} cells, "
                     f"{launch.status.upper()}")
    for cell in record.cells:
        head = f"cell {cell.name}: {cell.status.upper()}"
        if cell.accept_length is not None:
            ci = cell.accept_length_ci
            shown = f" (95% CI {ci[0]:.4f}-{ci[1]:.4f})" if ci else " (no CI)"
            head += (f"  accept length ({record.metric}) {cell.accept_length:.4f}{shown}, "
                     f"{cell.n_prompts} prompts")
        if cell.speedup_tpot is not None:
            head += f"  speedup tpot {cell.speedup_tpot:.3f}"
        if cell.speedup_throughput is not None:
            head += f"  speedup throughput {cell.speedup_throughput:.3f}"
        lines.append(head)
        if cell.status != "pass":
            lines += [f"  {reason}" for reason in cell.reasons]
        if cell.run_dir is not None:
            lines.append(f"  record: {cell.run_dir}")
    if record.gate is not None:
        lines.append(f"gate: accept length of each cell within {record.gate.max_drop:.1%} of "
                     "its category's reference cell's, paired by question (A: the reference "
                     "cell, B: the cell)")
        if record.gate.speedup_max_drop is not None:
            lines.append(f"gate: speedups (TPOT, throughput) of each cell within "
                         f"{record.gate.speedup_max_drop:.1%} of its reference cell's: "
                         f"{record.gate.speedup_definition}")
        for finding in record.gate.findings:
            gate_lines = [r for r in finding.reasons if r.startswith(("relative gate",
                                                                      "no gate",
                                                                      "speedup gate"))]
            for reason in gate_lines or finding.reasons:
                lines.append(f"cell {finding.cell} against {finding.reference}: {reason}")
            if finding.status != "pass":
                lines += [f"  {r}" for r in finding.reasons if r not in gate_lines]
    lines.append(f"grid: {record.status.upper()}")
    lines += [f"  {reason}" for reason in record.reasons]
    if outcome.folder is not None:
        lines.append(f"grid record: {Path(outcome.folder) / 'grid.json'}")
    return lines
