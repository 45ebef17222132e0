"""`harness soak SUITE --duration 10m --window 1m [--server URL]`: accept length per window
of serving time and the drift gate (harness.protocols.soak), its record and plot; with
`--server` on a server someone else started (harness.run.attach), as `harness run --server`."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.analysis.soak_plot import plot_soak
from harness.builds import parse_build_spec
from harness.errors import BadInput
from harness.protocols.soak import SoakOutcome, check_flags, run_soak, soak_settings
from harness.results.soaks import SOAK_FILE
from harness.run.attach import server_url
from harness.run.outcome import RunOptions
from harness.suite.model import load_suite


def run(args: argparse.Namespace) -> int:
    """`harness soak` (its arguments: commands/parsers/soak.py)."""
    if args.questions is not None and args.questions < 1:
        raise BadInput(f"--questions {args.questions}: at least 1 question")
    check_flags(args.duration, args.window, args.max_drift, args.alpha)  # before the suite
    loaded = load_suite(args.suite)
    settings = soak_settings(loaded.suite.soak, args.duration, args.window, args.max_drift,
                             args.alpha, args.inconclusive)
    if args.server is not None:
        server_url(args.server)  # a malformed URL ends here
        clashing = [flag for flag, given in (("--sglang/--build", args.sglang),
                                             ("--engine-python", args.engine_python))
                    if given is not None]
        if clashing:
            raise BadInput(f"--server soaks a server that is already running: "
                           f"{', '.join(clashing)} name(s) what to launch; leave it out")
    if args.sglang is not None:
        parse_build_spec(args.sglang, None, engine=loaded.suite.engine.kind)
    options = RunOptions(results_dir=args.results, sglang=args.sglang, dry_run=args.dry_run,
                         engine_python=args.engine_python, label=args.label,
                         plot=not args.no_plot, progress=not args.no_progress,
                         server=args.server)
    found = run_soak(loaded, settings, options, args.questions)
    if args.dry_run:
        print("\n".join(found.plan))
        return int(found.exit_code)
    for line in report_lines(found):
        print(line)
    if found.folder is not None and not args.no_plot and \
            any(window.accept_length is not None for window in found.record.windows):
        print(f"plot:   {plot_soak(found.folder, found.record)}")
    return int(found.exit_code)


def report_lines(found: SoakOutcome) -> list[str]:
    record = found.record
    lines = [f"soak: {record.duration_s:g} s in windows of {record.window_s:g} s; "
             f"{record.prefix_cache}",
             f"accept length per window: {record.window_definition}"]
    for window in record.windows:
        head = f"window {window.index} ({window.start_s:g}-{window.end_s:g} s): "
        if window.accept_length is None:
            lines.append(head + "no request finished")
            continue
        ci = f" (95% CI {window.ci[0]:.4f}-{window.ci[1]:.4f})" if window.ci else " (no CI)"
        lines.append(head + f"{record.metric} {window.accept_length:.4f}{ci}, "
                     f"{window.n_requests} requests")
    lines += [f"  {reason}" for reason in record.reasons]
    if record.run_dir is not None:
        lines.append(f"run record: {record.run_dir}")
    lines.append(f"soak: {record.status.upper()}")
    if found.folder is not None:
        lines.append(f"soak record: {Path(found.folder) / SOAK_FILE}")
    return lines
