"""`harness list`, `harness show SUITE`, `harness validate PATH...`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.errors import ExitCode, SuiteError


class ListCommand:
    name = "list"
    help = "list the shipped suites"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--suites-dir", type=Path, default=None,
                            help="folder of suite TOML files (default: the shipped suites/)")

    def run(self, args: argparse.Namespace) -> int:
        import shutil

        from harness.files import SUITES_DIR
        from harness.suite.listing import format_rows, listing

        folder = args.suites_dir or SUITES_DIR
        entries = listing(sorted(folder.glob("*.toml")), folder)
        # a terminal's width wraps the description; a pipe gets one line per suite
        width = shutil.get_terminal_size().columns if sys.stdout.isatty() else None
        for line in format_rows(entries, width):
            print(line)
        return ExitCode.BAD_INPUT if any(bad for _, bad in entries) else ExitCode.PASS


class ShowCommand:
    name = "show"
    help = "show a suite as validated, with defaults filled in"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("suite", help="suite file or name")
        parser.add_argument("--json", action="store_true", help="print JSON")
        from harness.commands import add_results_option

        add_results_option(parser, "where calibration records are looked for")

    def run(self, args: argparse.Namespace) -> int:
        import json

        from harness.engines.registry import secret_flags
        from harness.run.calibrate import calibration_lines
        from harness.secrets import redact_document
        from harness.suite.model import load_suite

        loaded = load_suite(args.suite)
        # as validated, with every secret the run would hide hidden here too
        data = redact_document(loaded.suite.model_dump(mode="json"),
                               secret_flags(loaded.suite.engine.kind))
        if args.json:
            print(json.dumps({"path": str(loaded.path), "sha256": loaded.sha256, "suite": data},
                             indent=2))
            return ExitCode.PASS
        print(f"# {loaded.path}  sha256 {loaded.sha256}")
        print(toml_text(data), end="")
        for line in calibration_lines(loaded, args.results):
            print(f"# {line}")  # comments: the output stays valid TOML
        return ExitCode.PASS


def toml_text(data: dict[str, object]) -> str:
    """The suite as TOML writes it (`true`/`false`, quoted strings, `[tables]` and
    `[[arrays of tables]]`): it loads back as the same suite. A field left unset (None,
    which TOML has no word for) is left out, as in the file."""
    import tomli_w

    return tomli_w.dumps(_without_none(data))


def _without_none(value: object) -> object:
    if isinstance(value, dict):
        return {k: _without_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_none(v) for v in value if v is not None]
    return value


class ValidateCommand:
    name = "validate"
    help = ("validate suite files as a run's preparation checks them (fields, entries, "
            "engine flags); exit 2 naming each bad field")

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("paths", nargs="+", type=Path, help="suite files or folders")

    def run(self, args: argparse.Namespace) -> int:
        from harness.errors import BadInput
        from harness.run.plan import check_suite
        from harness.suite.model import load_suite

        files: list[Path] = []
        for path in args.paths:
            files += sorted(path.glob("*.toml")) if path.is_dir() else [path]
        if not files:
            raise SuiteError(f"no suite files in {', '.join(map(str, args.paths))}")
        bad = 0
        for file in files:
            try:
                check_suite(load_suite(file))
                print(f"ok       {file}")
            except SuiteError as error:
                bad += 1
                print(error.message, file=sys.stderr)
            except BadInput as error:  # a check of the run's preparation
                bad += 1
                print(f"{file}: {error.message}", file=sys.stderr)
        print(f"{len(files) - bad} valid, {bad} invalid")
        return ExitCode.BAD_INPUT if bad else ExitCode.PASS
