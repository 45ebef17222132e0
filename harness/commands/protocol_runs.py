"""What the commands of the protocols over runs (`sweep`, `grid`, `soak`, `forced`) do
alike: the options of each run from the flags they all take, and their report printed."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable
from pathlib import Path

from harness.builds import parse_build_spec
from harness.errors import ExitCode
from harness.run.outcome import RunOptions
from harness.suite.model import LoadedSuite


def run_options(args: argparse.Namespace, loaded: LoadedSuite, dry_run: bool) -> RunOptions:
    """Each run's options from `--results --sglang --engine-python --label --no-plot
    --no-progress`, the `--sglang` build spec checked against the suite's engine first."""
    if args.sglang is not None:
        parse_build_spec(args.sglang, None, engine=loaded.suite.engine.kind)
    return RunOptions(results_dir=args.results, sglang=args.sglang, dry_run=dry_run,
                      engine_python=args.engine_python, label=args.label,
                      plot=not args.no_plot, progress=not args.no_progress)


def print_report(lines: Iterable[str], exit_code: ExitCode, folder: Path | None = None,
                 plot: Callable[[Path], Path] | None = None) -> int:
    """`lines` printed, then the plot `plot` draws in the record's `folder` (none without
    either); the protocol's exit code."""
    for line in lines:
        print(line)
    if folder is not None and plot is not None:
        print(f"plot:   {plot(folder)}")
    return int(exit_code)
