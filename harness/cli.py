"""`harness` entry point: parse the subcommand, run it, map errors to exit codes."""

from __future__ import annotations

import argparse
import difflib
import importlib
import os
import re
import sys
from collections.abc import Sequence
from typing import NoReturn

from harness import __version__
from harness.commands import COMMANDS, Command
from harness.errors import (
    EXIT_CODE_MEANINGS,
    ExitCode,
    HarnessError,
    interruption_text,
    sigterm_as_interrupt,
)
from harness.results.skips import reporting
from harness.secrets import guarded_streams, redact_text, register_process


def load_command(target: str) -> Command | None:
    module_name, _, class_name = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name == module_name:  # an optional command not installed in this build
            return None
        raise
    command: Command = getattr(module, class_name)()
    return command


class SubcommandParser(argparse.ArgumentParser):
    """A subcommand's parser: an argument it does not know is its own error (its usage,
    and the nearest flag it has), not the top-level parser's bare "unrecognized
    arguments"."""

    def parse_known_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                         namespace: argparse.Namespace | None = None,
                         ) -> tuple[argparse.Namespace, list[str]]:
        parsed, extras = super().parse_known_args(args, namespace)
        if extras:
            hint = nearest_flag(extras, self)
            self.error(f"unrecognized arguments: {' '.join(extras)}"
                       + (f" (did you mean {hint}?)" if hint else ""))
        return parsed, extras

    def error(self, message: str) -> NoReturn:
        """argparse's message, with the nearest choice for a mistyped one (`rnu` -> `run`)."""
        found = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
        if found:
            choices = re.findall(r"'([^']*)'", found.group(2))
            close = difflib.get_close_matches(found.group(1), choices, n=1)
            if close:
                message += f" (did you mean {close[0]}?)"
        super().error(message)


def nearest_flag(extras: Sequence[str], parser: argparse.ArgumentParser) -> str | None:
    """The parser's flag closest to the first unknown one (`--dry_run` -> `--dry-run`)."""
    flags = [flag for action in parser._actions for flag in action.option_strings
             if flag.startswith("--")]
    for extra in extras:
        if not extra.startswith("-"):
            continue
        word = extra.split("=", 1)[0]
        normal = "--" + word.lstrip("-").replace("_", "-").lower()
        if normal in flags:
            return normal
        close = difflib.get_close_matches(normal, flags, n=1, cutoff=0.6)
        if close:
            return close[0]
    return None


def build_parser() -> tuple[argparse.ArgumentParser, dict[str, Command]]:
    parser = SubcommandParser(
        prog="harness",
        description="Acceptance tests and benchmarks for speculative decoding in SGLang and vLLM.",
        epilog="Exit codes: " + "; ".join(f"{code} {meaning}"
                                          for code, meaning in EXIT_CODE_MEANINGS.items()) + ".",
    )
    parser.add_argument("--version", action="version", version=f"harness {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND",
                                       parser_class=SubcommandParser)
    commands: dict[str, Command] = {}
    for name, target in COMMANDS.items():
        command = load_command(target)
        if command is None:
            continue
        sub = subparsers.add_parser(name, help=command.help, description=command.help)
        command.add_arguments(sub)
        commands[name] = command
    return parser, commands


def main(argv: Sequence[str] | None = None) -> int:
    # every secret the process knows is redacted in all it prints (and every file it
    # writes); control characters of record text are escaped (harness.secrets)
    register_process(os.environ, list(sys.argv[1:] if argv is None else argv))
    with guarded_streams():
        try:
            with sigterm_as_interrupt():  # a SIGTERM anywhere in a command: exit 130
                return _main(argv)
        except KeyboardInterrupt as error:  # landed outside the command's own handling
            print(f"harness: {interruption_text(error)}", file=sys.stderr)
            return int(ExitCode.INTERRUPTED)


def _main(argv: Sequence[str] | None = None) -> int:
    parser, commands = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return ExitCode.BAD_INPUT
    try:
        with reporting():  # each unusable file is reported once per command
            return int(commands[args.command].run(args))
    except HarnessError as error:

        print(f"harness {args.command}: {redact_text(error.message)}", file=sys.stderr)
        return int(error.exit_code)
    except KeyboardInterrupt as error:  # Ctrl-C, or SIGTERM (errors.Terminated)
        print(f"harness {args.command}: {interruption_text(error)}", file=sys.stderr)
        return int(ExitCode.INTERRUPTED)
    except BrokenPipeError:
        # `harness show X | head`: the reader left; say nothing more, as other tools do.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return int(ExitCode.PASS)


if __name__ == "__main__":
    sys.exit(main())
