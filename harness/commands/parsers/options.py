"""The arguments several commands take alike, each declared here once: the same flag,
type, default and words wherever it appears (a command passes its own help where the
meaning is its own); `SuiteCommand`, the commands whose first argument is a suite. Light,
as every parser (harness/commands/__init__.py)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import ClassVar

from harness.commands import Command
from harness.files import RESULTS_DIR, RESULTS_ENV, default_results_dir

SUITE_HELP = "suite file or name"
LISTED_SUITE_HELP = "suite file or name (see `harness list`)"
REFERENCE_ENGINE_PYTHON_HELP = "interpreter of the reference engine's environment"


class SuiteCommand(Command):
    """A command whose first argument is the suite it works on (a file or a name); its own
    arguments follow (`add_options`)."""

    suite_help: ClassVar[str] = LISTED_SUITE_HELP

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("suite", help=self.suite_help)
        self.add_options(parser)

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        """The arguments after the suite (none by default)."""


def add_results_option(parser: argparse.ArgumentParser, help: str = "results folder") -> None:
    """`--results DIR`, the same flag and default in every command that reads or writes
    runs: $HARNESS_RESULTS when set, else ./results (`files.default_results_dir`)."""
    parser.add_argument("--results", type=Path, default=default_results_dir(), metavar="DIR",
                        help=f"{help} (default: ${RESULTS_ENV}, else ./{RESULTS_DIR})")


def add_engine_python_option(parser: argparse.ArgumentParser,
                             help: str = REFERENCE_ENGINE_PYTHON_HELP) -> None:
    """`--engine-python PATH`: the interpreter an engine runs in."""
    parser.add_argument("--engine-python", metavar="PATH", help=help)


def add_build_options(parser: argparse.ArgumentParser) -> None:
    """`--sglang/--build SPEC` and `--engine-python PATH` as the protocols over runs take
    them (`commands/protocol_runs.run_options` reads them)."""
    parser.add_argument("--sglang", "--build", dest="sglang", metavar="SPEC",
                        help="build under test (as `harness run --build`)")
    add_engine_python_option(parser, "interpreter of the engine's environment")


def add_results_and_build_options(parser: argparse.ArgumentParser) -> None:
    """`--results`, then the build options: where a protocol's runs are recorded and what
    they run, in the order `forced`, `soak` and `grid` list them."""
    add_results_option(parser)
    add_build_options(parser)


def add_json_option(parser: argparse.ArgumentParser, help: str) -> None:
    """`--json`: print what the command found as JSON instead of text."""
    parser.add_argument("--json", action="store_true", help=help)


def add_drawing_options(parser: argparse.ArgumentParser, plot_help: str) -> None:
    """`--no-plot` and `--no-progress`, which a run's options read (`RunOptions.plot`,
    `.progress`)."""
    parser.add_argument("--no-plot", action="store_true", help=plot_help)
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def add_record_options(parser: argparse.ArgumentParser, *, label_help: str, plot_help: str,
                       dry_run_help: str | None = None) -> None:
    """The last options of a protocol over runs (`sweep`, `grid`, `soak`, `forced`):
    `--label`, `--dry-run` where the protocol has one, `--no-plot`, `--no-progress`
    (`commands/protocol_runs.run_options` reads them)."""
    parser.add_argument("--label", help=label_help)
    if dry_run_help is not None:
        parser.add_argument("--dry-run", action="store_true", help=dry_run_help)
    add_drawing_options(parser, plot_help)


def add_questions_option(parser: argparse.ArgumentParser, help: str) -> None:
    """`--questions N`: how many of the suite's questions a protocol asks."""
    parser.add_argument("--questions", type=int, metavar="N", help=help)


def add_gate_options(parser: argparse.ArgumentParser, *, alpha_help: str,
                     inconclusive_help: str, alpha: float | None = None,
                     inconclusive: str | None = None) -> None:
    """`--alpha` and `--inconclusive`: a protocol's one-sided gate, its level and how a
    finding neither shown within nor beyond the tolerance is judged (None: the suite's)."""
    parser.add_argument("--alpha", type=float, default=alpha, help=alpha_help)
    parser.add_argument("--inconclusive", choices=("pass", "fail"), default=inconclusive,
                        help=inconclusive_help)


def add_raw_epilog(parser: argparse.ArgumentParser, epilog: str) -> None:
    """An epilog printed with its own line breaks (a table, a list of exit codes)."""
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = epilog
