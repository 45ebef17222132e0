"""`harness` entry point: parse the subcommand, run it, map errors to exit codes."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

from harness import __version__
from harness.commands import COMMANDS, Command
from harness.errors import EXIT_CODE_MEANINGS, ExitCode, HarnessError, interruption_text


def load_command(target: str) -> Command | None:
    module_name, _, class_name = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name == module_name:  # an optional command not installed in this build
            return None
        raise
    return getattr(module, class_name)()


def build_parser() -> tuple[argparse.ArgumentParser, dict[str, Command]]:
    parser = argparse.ArgumentParser(
        prog="harness",
        description="Acceptance tests and benchmarks for speculative decoding in SGLang.",
        epilog="Exit codes: " + "; ".join(f"{code} {meaning}"
                                          for code, meaning in EXIT_CODE_MEANINGS.items()) + ".",
    )
    parser.add_argument("--version", action="version", version=f"harness {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
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
    from harness.mask import guarded_streams
    from harness.suite.secrets import register_process

    # every secret the process knows is masked in all it prints (and every file it writes);
    # control characters of record text are escaped (harness.mask)
    register_process(os.environ, list(sys.argv[1:] if argv is None else argv))
    with guarded_streams():
        return _main(argv)


def _main(argv: Sequence[str] | None = None) -> int:
    parser, commands = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return ExitCode.BAD_INPUT
    from harness.results.skips import reporting

    try:
        with reporting():  # each unusable file is reported once per command
            return int(commands[args.command].run(args))
    except HarnessError as error:
        from harness.suite.secrets import redact_url  # a spec's credentials stay hidden

        print(f"harness {args.command}: {redact_url(error.message)}", file=sys.stderr)
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
