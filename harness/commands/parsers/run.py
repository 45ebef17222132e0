"""The parser of `harness run`; its work: harness/commands/run.py."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.commands.parsers import options
from harness.commands.parsers.options import SuiteCommand


class RunCommand(SuiteCommand, name="run", work="harness.commands.run:run"):
    help = ("run a suite: preflight, launch, drive its workloads (GSM8K, Spec-Bench, "
            "HumanEval or JSONL prompts), accept length, verdict, record")

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--dry-run", action="store_true",
                            help="print the launch command and workload plan; run nothing")
        parser.add_argument("--prepare-only", action="store_true",
                            help="make (or find) the engine's environment and the models, "
                                 "print where they are, and stop: nothing launched or "
                                 "recorded (e.g. on a host with the network, before the GPU "
                                 "run)")
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
        options.add_results_option(parser)
        options.add_engine_python_option(
            parser, "interpreter of the engine's environment (the reference engine's, or an "
            "installed SGLang's for an SGLang suite)")
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
        options.add_drawing_options(parser, "do not draw the run's plot")
