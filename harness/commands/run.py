"""`harness run SUITE`: one acceptance run, from preflight to record and plot."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.commands import add_results_option


def launcher_options(args: argparse.Namespace) -> object:
    """`--slurm-*` as the Slurm launcher's options (BadInput for a kubernetes launch that is
    not a dry run: the harness prints its manifest, `kubectl apply` starts it)."""
    from harness.errors import BadInput

    if args.launcher == "kubernetes":
        if not args.dry_run:
            raise BadInput("--launcher kubernetes prints a LeaderWorkerSet manifest: add "
                           "--dry-run, `kubectl apply -f` it, then measure the deployment "
                           "with `harness run SUITE --server URL`")
        return None
    from harness.run.schedulers.slurm import SlurmOptions

    if args.slurm_start_timeout <= 0:
        raise BadInput("--slurm-start-timeout must be positive")
    for option in args.slurm_option:
        if not option.startswith("--") or "\n" in option:
            raise BadInput(f"--slurm-option {option!r}: give one sbatch option, e.g. "
                           "--slurm-option=--qos=high")
    return SlurmOptions(partition=args.slurm_partition, time_limit=args.slurm_time,
                        account=args.slurm_account, extra=tuple(args.slurm_option),
                        start_timeout_s=args.slurm_start_timeout)


class RunCommand:
    name = "run"
    help = ("run a suite: preflight, launch, drive its workloads (GSM8K, Spec-Bench, "
            "HumanEval or JSONL prompts), accept length, verdict, record")

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("suite", help="suite file or name (see `harness list`)")
        parser.add_argument("--dry-run", action="store_true",
                            help="print the launch command and workload plan; run nothing")
        parser.add_argument("--sglang", "--build", dest="sglang", metavar="SPEC",
                            help="build under test: sglang==X, git+URL@REF[#subdirectory="
                            "python], a local checkout PATH[@REF]; for a reference-engine "
                            "suite reference:policy=fixed|legacy|regressed[,noise=X] or "
                            "reference:PATH[@REF] (default: the installed sglang, else the "
                            "suite's default_build)")
        parser.add_argument("--patch", type=Path, metavar="FILE",
                            help="a diff in SGLang's layout (python/sglang/...) on top of "
                            "--sglang (default: the suite's default_build): applied to a copy "
                            "of a local checkout, or to a copy of a release's or git build's "
                            "installed package")
        add_results_option(parser)
        parser.add_argument("--engine-python", metavar="PATH",
                            help="interpreter of the engine's environment (the reference "
                            "engine's, or an installed SGLang's for an SGLang suite)")
        parser.add_argument("--target-model", metavar="ID_OR_PATH",
                            help="serve this target instead of the suite's (required when the "
                            "suite's target has no public id and its variable is unset)")
        parser.add_argument("--draft-model", metavar="ID_OR_PATH",
                            help="serve this draft instead of the suite's")
        parser.add_argument("--entry", action="append", dest="entries", metavar="NAME",
                            help="run only this workload entry (repeatable; `main` is "
                            "[workload]; default: every entry of the suite)")
        parser.add_argument("--label", help="a tag recorded with the run (e.g. pre-fix)")
        parser.add_argument("--sequential", action="store_true",
                            help="stop as soon as the verdict is settled at the suite's "
                            "alpha/beta (fewer requests)")
        parser.add_argument("--against", nargs="?", const="", metavar="SPEC",
                            help="also judge the build against reference build SPEC, paired by "
                            "question (the suite's [gate]: tolerated drop, alpha); bare: the "
                            "suite's gate.against. A stored run of SPEC is reused when it is "
                            "the same measurement, else SPEC runs first on this host")
        parser.add_argument("--against-label", default="against", metavar="LABEL",
                            help="label recorded with the reference run (default: against)")
        parser.add_argument("--no-reuse", action="store_true",
                            help="with --against: always measure the reference in this job")
        parser.add_argument("--no-enforce-contract", action="store_true",
                            help="measure a build whose draft attention differs from the "
                            "suite's expected_layers (noted in the record) instead of failing it")
        parser.add_argument("--server", metavar="URL",
                            help="measure a server someone else started (e.g. "
                            "http://10.0.0.5:30000): no launch, no kill; refused, naming the "
                            "field, when it does not serve what the suite declares")
        parser.add_argument("--launcher", choices=("slurm", "kubernetes"),
                            help="start the suite's topology through a scheduler: slurm (a "
                            "job: sbatch, srun, scancel at the end; with --dry-run the batch "
                            "script) or kubernetes (with --dry-run: a LeaderWorkerSet "
                            "manifest for kubectl apply; measure it with --server)")
        parser.add_argument("--slurm-partition", metavar="NAME")
        parser.add_argument("--slurm-time", metavar="LIMIT", help="sbatch --time")
        parser.add_argument("--slurm-account", metavar="NAME")
        parser.add_argument("--slurm-option", action="append", default=[], metavar="OPT",
                            help="another sbatch option, e.g. --slurm-option=--qos=high "
                            "(repeatable)")
        parser.add_argument("--slurm-start-timeout", type=float, default=600.0, metavar="S",
                            help="cancel the job and end with exit 3 when it has not started "
                            "after S seconds (default 600)")
        parser.add_argument("--no-plot", action="store_true", help="do not draw the run's plot")
        parser.add_argument("--no-progress", action="store_true", help="no progress bar")

    def run(self, args: argparse.Namespace) -> int:
        from harness.run.runner import RunOptions, run_suite
        from harness.suite.model import load_suite

        loaded = load_suite(args.suite)
        options = RunOptions(
            results_dir=args.results, sglang=args.sglang, patch=args.patch,
            dry_run=args.dry_run, engine_python=args.engine_python, label=args.label,
            plot=not args.no_plot, sequential=args.sequential, progress=not args.no_progress,
            target_model=args.target_model, draft_model=args.draft_model,
            entries=args.entries, enforce_contract=not args.no_enforce_contract,
            server=args.server, launcher=args.launcher,
        )
        if args.launcher is not None:
            options.launcher_options = launcher_options(args)
        if args.server is not None:
            from harness.errors import BadInput
            from harness.run.attach import server_url

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
            from harness.build import parse_build_spec
            from harness.run.plan import requested_spec

            # bad specs, and specs for the other engine, end here before any work
            parse_build_spec(requested_spec(loaded.suite, args.sglang, args.patch), args.patch,
                             engine=loaded.suite.engine.kind)
        against = None
        if args.against is not None:
            from harness.errors import BadInput
            from harness.run.pairing import check_against

            against = check_against(loaded, args.against or None)
            if against is None:
                raise BadInput(f"--against: suite {loaded.suite.name} declares no "
                               "gate.against; give a build SPEC")
        if against is not None and not args.dry_run:
            from harness.run.pairing import run_paired

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


def speed_of(outcome: object) -> list[str]:
    """Each measured entry's latency and throughput (harness.metrics.latency, as its
    record holds them; definitions in the record and docs/speed.md)."""
    from harness.metrics.latency import speed_lines
    from harness.metrics.speedup import speedup_lines

    entries = getattr(outcome, "entries", None) or [outcome]
    lines = []
    for entry in entries:
        record = getattr(entry, "record", None)
        measurement = record.measurement if record is not None else None
        if measurement is None or measurement.latency is None:
            continue
        series = f" {record.suite.name}" if len(entries) > 1 else ""
        lines.append(f"speed{series} (definitions: run.json measurement.latency):")
        lines += [f"  {line}" for line in speed_lines(measurement.latency)]
        if measurement.speedup is not None:
            lines += [f"  {line}" for line in speedup_lines(measurement.speedup)]
    return lines


def drawn_plots(outcome: object) -> list[Path]:
    """The PNGs the run drew, each entry's (the run figure, its categories, its latency)."""
    from harness.analysis.plot_categories import CATEGORIES_PNG
    from harness.analysis.plot_latency import LATENCY_PNG
    from harness.analysis.plots import RUN_PNG

    entries = getattr(outcome, "entries", None) or [outcome]
    folders = [entry.run_dir for entry in entries if entry.run_dir is not None]
    return [folder / name for folder in folders for name in (RUN_PNG, CATEGORIES_PNG, LATENCY_PNG)
            if (folder / name).is_file()]
