"""`harness soak SUITE --duration 10m --window 1m [--server URL]`: accept length per window
of serving time and the drift gate (harness.protocols.soak), its record and plot; with
`--server` on a server someone else started (harness.run.attach), as `harness run --server`."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.analysis.soak_plot import plot_soak
from harness.commands.protocol_runs import print_report, run_options
from harness.errors import BadInput
from harness.protocols.soak import SoakOutcome, check_flags, run_soak, soak_settings
from harness.results.soaks import SOAK_FILE
from harness.run.attach import server_url
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
    options = run_options(args, loaded, args.dry_run)
    options.server = args.server
    found = run_soak(loaded, settings, options, args.questions)
    if args.dry_run:
        return print_report(found.plan, found.exit_code)
    drawn = not args.no_plot and any(window.accept_length is not None
                                     for window in found.record.windows)
    return print_report(report_lines(found), found.exit_code, found.folder,
                        (lambda folder: plot_soak(folder, found.record)) if drawn else None)


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
