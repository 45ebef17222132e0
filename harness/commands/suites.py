"""`harness show SUITE`, `harness validate PATH...` (`harness list`: listing.py)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import tomli_w

from harness.engines.registry import secret_flags
from harness.errors import BadInput, ExitCode, SuiteError
from harness.protocols.calibrate import calibration_lines
from harness.run.exit_codes import input_exit
from harness.run.plan import check_suite
from harness.secrets import redact_document
from harness.suite.model import load_suite


def show(args: argparse.Namespace) -> ExitCode:
    """`harness show` (its arguments: commands/parsers/suites.py)."""
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


def validate(args: argparse.Namespace) -> ExitCode:
    """`harness validate` (its arguments: commands/parsers/suites.py)."""
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
    return input_exit(bool(bad))






def toml_text(data: dict[str, object]) -> str:
    """The suite as TOML writes it (`true`/`false`, quoted strings, `[tables]` and
    `[[arrays of tables]]`): it loads back as the same suite. A field left unset (None,
    which TOML has no word for) is left out, as in the file."""
    return tomli_w.dumps({k: _without_none(v) for k, v in data.items() if v is not None})


def _without_none(value: object) -> object:
    if isinstance(value, dict):
        return {k: _without_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_none(v) for v in value if v is not None]
    return value


