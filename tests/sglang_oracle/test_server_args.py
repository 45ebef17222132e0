"""Every shipped SGLang suite's launch line, parsed by SGLang's own parser (`nox -s sglang_args`).

`python -m sglang.launch_server ARGV` runs `prepare_server_args(ARGV)` (argparse from
`ServerArgs.add_cli_args`, then `ServerArgs.from_cli_args`) and then `run_server`, whose
`server_args.resolve_once()` cannot run without a GPU: `_handle_dflash`
(arg_groups/speculative_hook.py) refuses DFLASH on `CpuSRTPlatform`, and resolution loads
the target's config from the hub. So this checks, with SGLang's code: every flag the
harness passes is one SGLang knows, with a value its parser accepts, landing in the field
the harness means; the suites' extra_args parse too; and the reserved flags of
`harness.engines.sglang` are every alias of the flags the harness sets, with no other
SGLang option among their prefixes (so refusing every prefix of a reserved flag is safe).

Needs sglang installed (`nox -s sglang_args` installs 0.5.23 with torch CPU); elsewhere it
skips, unless HARNESS_REQUIRE_SGLANG=1 (set by that session) makes a failed import fail.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.errors import BadInput
from harness.suite.model import load_suite

SUITES = Path(__file__).resolve().parents[2] / "suites"
HOST, PORT = "127.0.0.1", 30000


def _server_args() -> Any:
    try:
        return importlib.import_module("sglang.srt.server_args")
    except ImportError as error:
        if os.environ.get("HARNESS_REQUIRE_SGLANG") == "1":
            raise
        pytest.skip(f"sglang.srt.server_args does not import here ({error}); "
                    "run `nox -s sglang_args`")


@pytest.fixture(scope="module")
def server_args() -> Any:
    return _server_args()


@pytest.fixture(scope="module")
def parser(server_args: Any) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sglang serve")
    server_args.ServerArgs.add_cli_args(parser)
    return parser


def sglang_suites() -> Iterator[Any]:
    for path in sorted(SUITES.glob("*.toml")):
        suite = load_suite(path).suite
        # A suite with test-only patches runs a patched SGLang, whose parser
        # tests/sglang_dflash_cpu checks on its launch line; the release's refuses it.
        if suite.engine.kind == "sglang" and not suite.engine.test_patches:
            yield suite


def launch_argv(suite: Any) -> tuple[list[str], list[str]]:
    """(the harness's own flags, extra_args), as `launch_command` builds them."""
    sglang = importlib.import_module("harness.engines.sglang")
    try:
        command = sglang.launch_command(suite, "python", HOST, PORT)
    except BadInput:
        # A suite whose weights come from the environment: placeholders stand in.
        if "models" not in inspect.signature(sglang.launch_command).parameters:
            raise
        checkpoints = importlib.import_module("harness.suite.checkpoints")
        models = checkpoints.Models("org/target", "org/draft")
        command = sglang.launch_command(suite, "python", HOST, PORT, models=models)
    assert command[1:3] == ["-m", "sglang.launch_server"], command
    argv = command[3:]
    extra = list(suite.engine.extra_args)
    own = argv[:len(argv) - len(extra)] if extra else argv
    assert argv[len(own):] == extra, "extra_args must come last"
    return own, extra


def flags_of(argv: list[str]) -> list[str]:
    return [arg.split("=", 1)[0] for arg in argv if arg.startswith("--")]


def harness_set_flags() -> set[str]:
    flags = {flag for suite in sglang_suites() for flag in flags_of(launch_argv(suite)[0])}
    reserved = getattr(importlib.import_module("harness.engines.sglang"), "RESERVED_FLAGS", ())
    return flags | set(reserved)


@pytest.mark.parametrize("suite", list(sglang_suites()), ids=lambda s: s.name)
def test_sglang_parses_the_launch_line(suite: Any, server_args: Any,
                                       parser: argparse.ArgumentParser) -> None:
    own, extra = launch_argv(suite)
    try:
        args = server_args.prepare_server_args([*own, *extra])  # what launch_server runs
    except SystemExit as error:  # argparse's way of refusing
        pytest.fail(f"SGLang's parser refused suite {suite.name}'s launch line: exit {error}")
    actions = parser._option_string_actions
    for index, arg in enumerate(own):
        if not arg.startswith("--"):
            continue
        action = actions.get(arg)
        assert action is not None, f"{suite.name}: SGLang has no option {arg}"
        value = own[index + 1]
        expected = action.type(value) if callable(action.type) else value
        assert getattr(args, action.dest) == expected, f"{suite.name}: {arg} {value}"


def test_reserved_flags_are_every_alias_and_no_other_option_is_a_prefix(
        parser: argparse.ArgumentParser) -> None:
    actions = parser._option_string_actions
    flags = harness_set_flags()
    unknown = sorted(flag for flag in flags if flag not in actions)
    assert not unknown, f"harness flags SGLang does not define: {unknown}"
    owned = {id(actions[flag]) for flag in flags}
    dests = {actions[flag].dest for flag in flags}
    # Every option that writes a field the harness sets: the option strings to refuse.
    aliases = sorted({option for option, action in actions.items()
                      if id(action) in owned or action.dest in dests})
    print("SGLang option strings for the fields the harness sets:", " ".join(aliases))
    reserved = getattr(importlib.import_module("harness.engines.sglang"), "RESERVED_FLAGS", None)
    if reserved is not None:
        missing = sorted(set(aliases) - set(reserved))
        assert not missing, f"RESERVED_FLAGS lacks these SGLang aliases: {missing}"
    assert all(alias.startswith("--") for alias in aliases), aliases
    clashes = sorted((option, flag) for option in actions for flag in aliases
                     if flag.startswith(option) and option != flag and option not in aliases)
    assert not clashes, f"SGLang options that are prefixes of reserved flags: {clashes}"
