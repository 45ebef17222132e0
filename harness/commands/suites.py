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
        from harness.results.layout import SUITES_DIR
        from harness.suite.listing import listing

        folder = args.suites_dir or SUITES_DIR
        failed = False
        for line, invalid in listing(sorted(folder.glob("*.toml")), folder):
            print(line)
            failed = failed or invalid
        return ExitCode.BAD_INPUT if failed else ExitCode.PASS


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

        from harness.run.calibrate import calibration_lines
        from harness.run.plan import engine_secret_flags
        from harness.suite.model import load_suite
        from harness.suite.secrets import redact_document

        loaded = load_suite(args.suite)
        # as validated, with every secret the run would hide hidden here too
        data = redact_document(loaded.suite.model_dump(mode="json"),
                               engine_secret_flags(loaded.suite.engine.kind))
        if args.json:
            print(json.dumps({"path": str(loaded.path), "sha256": loaded.sha256, "suite": data},
                             indent=2))
            return ExitCode.PASS
        print(f"# {loaded.path}  sha256 {loaded.sha256}")
        _print_tree(data)
        for line in calibration_lines(loaded, args.results):
            print(line)
        return ExitCode.PASS


def _print_tree(data: object, indent: str = "") -> None:
    if isinstance(data, dict):
        for key, value in data.items():
            if isinstance(value, dict | list) and value and not _is_scalar_list(value):
                print(f"{indent}{key}:")
                _print_tree(value, indent + "  ")
            else:
                print(f"{indent}{key}: {value}")
    elif isinstance(data, list):
        for item in data:
            print(f"{indent}-")
            _print_tree(item, indent + "  ")
    else:
        print(f"{indent}{data}")


def _is_scalar_list(value: object) -> bool:
    return isinstance(value, list) and all(not isinstance(v, dict | list) for v in value)


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
