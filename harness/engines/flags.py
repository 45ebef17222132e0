"""Flags an engine adapter owns, refused in a suite's `engine.extra_args`; its secret flags.

One check for every engine. Both SGLang's and the reference engine's parsers are
`argparse` parsers with abbreviations allowed, so a prefix of an owned flag
(`--speculative-alg`) reaches the same setting; and argparse keeps the last value, so an
owned flag repeated in extra_args would silently win. Hence: refuse every owned flag,
its aliases and every prefix of them. (tests/sglang_oracle checks against SGLang's own
parser that no other SGLang flag is such a prefix.)

Flag resolution is `harness.secrets.resolve_flag`, the one redaction uses too, so
that `--api-k KEY` is hidden wherever `--api-key KEY` is. Each adapter gives its own
lists (`reserved_flags`, `secret_flags`); `check_suite_flags` is what a run's
preparation checks and `harness validate` runs on the suite alone.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from harness.errors import BadInput
from harness.secrets import resolve_flag


def owned_flag(arg: str, reserved: Iterable[str]) -> str | None:
    """The owned flag `arg` would set (itself, an alias or by abbreviation), else None."""
    owned = resolve_flag(arg, reserved)
    return owned[0] if owned else None


def check_extra_args(suite_name: str, extra: Sequence[str], reserved: Iterable[str],
                     why: str) -> None:
    """BadInput naming the first argument of `extra` that would set an owned flag."""
    reserved = tuple(reserved)
    for arg in extra:
        owned = owned_flag(arg, reserved)
        if owned is not None:
            shown = arg if arg.split("=", 1)[0] == owned else f"{arg} (taken as {owned})"
            raise BadInput(f"suite {suite_name}: engine.extra_args may not set {shown}; "
                           f"the harness sets it: {why}")


def check_secret_abbreviations(suite_name: str, extra: Sequence[str],
                               secret: Iterable[str]) -> None:
    """BadInput naming an abbreviated secret flag (`--api-k`): redaction resolves it, but
    a secret is passed in full or not at all, so that every reader sees which flag it is."""
    secret = tuple(secret)
    for arg in extra:
        flag = arg.split("=", 1)[0]
        targets = resolve_flag(arg, secret)
        if targets and flag not in secret:
            raise BadInput(f"suite {suite_name}: engine.extra_args abbreviates the secret "
                           f"flag {' or '.join(targets)} as {flag}: write it in full")


def check_suite_flags(suite_name: str, extra: Sequence[str], reserved: Iterable[str],
                      secret: Iterable[str], why: str) -> None:
    """Every check of `engine.extra_args` (a run's preparation and `harness validate`)."""
    check_extra_args(suite_name, extra, reserved, why)
    check_secret_abbreviations(suite_name, extra, secret)


def without_flags(command: Sequence[str], flags: Iterable[str]) -> list[str]:
    """`command` without each of `flags` and its value (`--flag VALUE` or `--flag=VALUE`):
    a launch line the harness built (no extra argument sets an owned flag), less some of
    its own flags, the rest in order."""
    dropped = frozenset(flags)
    out: list[str] = []
    skip = False
    for arg in command:
        if skip:
            skip = False
            continue
        name = arg.split("=", 1)[0]
        if name in dropped:
            skip = "=" not in arg
            continue
        out.append(arg)
    return out
