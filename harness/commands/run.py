"""`harness run SUITE`: one acceptance run, from preflight to record and plot."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.builds import parse_build_spec
from harness.errors import BadInput
from harness.metrics.latency import speed_lines
from harness.metrics.speedup import speedup_lines
from harness.protocols.pairing import check_against, run_paired
from harness.results.layout import CATEGORIES_PNG, LATENCY_PNG, RUN_PNG
from harness.run.attach import server_url
from harness.run.outcome import RunOutcome
from harness.run.plan import requested_spec
from harness.run.runner import RunOptions, run_suite
from harness.run.schedulers.slurm import SlurmOptions
from harness.suite.model import load_suite


def launcher_options(args: argparse.Namespace) -> SlurmOptions | None:
    """`--slurm-*` as the Slurm launcher's options (BadInput for a kubernetes launch that is
    not a dry run: the harness prints its manifest, `kubectl apply` starts it)."""
    if args.launcher == "kubernetes":
        if not args.dry_run:
            raise BadInput("--launcher kubernetes prints a LeaderWorkerSet manifest: add "
                           "--dry-run, `kubectl apply -f` it, then measure the deployment "
                           "with `harness run SUITE --server URL`")
        return None
    if args.slurm_start_timeout <= 0:
        raise BadInput("--slurm-start-timeout must be positive")
    for option in args.slurm_option:
        if not option.startswith("--") or "\n" in option:
            raise BadInput(f"--slurm-option {option!r}: give one sbatch option, e.g. "
                           "--slurm-option=--qos=high")
    return SlurmOptions(partition=args.slurm_partition, time_limit=args.slurm_time,
                        account=args.slurm_account, extra=tuple(args.slurm_option),
                        start_timeout_s=args.slurm_start_timeout)


def run(args: argparse.Namespace) -> int:
    """`harness run` (its arguments: commands/parsers/run.py)."""
    loaded = load_suite(args.suite)
    options = RunOptions(
        results_dir=args.results, sglang=args.sglang, patch=args.patch,
        dry_run=args.dry_run, engine_python=args.engine_python, label=args.label,
        plot=not args.no_plot, sequential=args.sequential, progress=not args.no_progress,
        target_model=args.target_model, draft_model=args.draft_model,
        entries=args.entries, enforce_contract=not args.no_enforce_contract,
        server=args.server, launcher=args.launcher, prepare_only=args.prepare_only,
    )
    if args.prepare_only:
        clashing = [flag for flag, given in (
            ("--dry-run", args.dry_run), ("--server", args.server is not None),
            ("--against", args.against is not None), ("--launcher", args.launcher is not None))
            if given]
        if clashing:
            raise BadInput(f"--prepare-only makes the engine's environment and stops: "
                           f"{', '.join(clashing)} ask(s) for a run; leave it out")
    if args.launcher is not None:
        options.launcher_options = launcher_options(args)
    if args.server is not None:
        server_url(args.server)  # a malformed URL ends here
        clashing = [flag for flag, given in (
            ("--sglang/--build", args.sglang), ("--patch", args.patch),
            ("--engine-python", args.engine_python), ("--against", args.against))
            if given is not None]
        if args.launcher is not None:
            clashing.append("--launcher")
        if clashing:
            raise BadInput(f"--server measures a server that is already running: "
                           f"{', '.join(clashing)} name(s) what to launch; leave "
                           "it out")
    if args.patch is not None or args.sglang is not None:
        # bad specs, and specs for the other engine, end here before any work
        parse_build_spec(requested_spec(loaded.suite, args.sglang, args.patch), args.patch,
                         engine=loaded.suite.engine.kind)
    against = None
    if args.against is not None:
        against = check_against(loaded, args.against or None)
        if against is None:
            raise BadInput(f"--against: suite {loaded.suite.name} declares no "
                           "gate.against; give a build SPEC")
    if against is not None and not args.dry_run:
        outcome = run_paired(loaded, options, against, args.against_label,
                             reuse=not args.no_reuse)
    else:
        outcome = run_suite(loaded, options)
    if against is not None and args.dry_run:
        outcome.plan.append(f"paired against: {against} (reused when a stored run is the "
                            "same measurement, else measured first on this host)")
    if outcome.plan:
        print("\n".join(outcome.plan))
    if args.dry_run:
        return int(outcome.exit_code)
    if args.prepare_only:
        print("\n".join(outcome.reasons))
        return int(outcome.exit_code)
    print(f"verdict: {outcome.status.upper()}")
    for reason in outcome.reasons:
        print(f"  {reason}")
    if outcome.run_dir is not None:
        print(f"record: {outcome.run_dir}")
    for line in speed_of(outcome):
        print(f"  {line}")
    for png in drawn_plots(outcome):
        print(f"plot:   {png}")
    return int(outcome.exit_code)




def speed_of(outcome: RunOutcome) -> list[str]:
    """Each measured entry's latency and throughput (harness.metrics.latency, as its
    record holds them; definitions in the record and docs/speed.md)."""
    entries = getattr(outcome, "entries", None) or [outcome]
    lines = []
    for entry in entries:
        record = getattr(entry, "record", None)
        measurement = record.measurement if record is not None else None
        if record is None or measurement is None or measurement.latency is None:
            continue
        series = f" {record.suite.name}" if len(entries) > 1 else ""
        lines.append(f"speed{series} (definitions: run.json measurement.latency):")
        lines += [f"  {line}" for line in speed_lines(measurement.latency)]
        if measurement.speedup is not None:
            lines += [f"  {line}" for line in speedup_lines(measurement.speedup)]
    return lines


def drawn_plots(outcome: RunOutcome) -> list[Path]:
    """The PNGs the run drew, each entry's (the run figure, its categories, its latency)."""
    entries = getattr(outcome, "entries", None) or [outcome]
    folders = [entry.run_dir for entry in entries if entry.run_dir is not None]
    return [folder / name for folder in folders for name in (RUN_PNG, CATEGORIES_PNG, LATENCY_PNG)
            if (folder / name).is_file()]
