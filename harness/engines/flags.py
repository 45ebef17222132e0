"""Flags an engine adapter owns, refused in a suite's `engine.extra_args`.

One check for every engine. Both SGLang's and the reference engine's parsers are
`argparse` parsers with abbreviations allowed, so a prefix of an owned flag
(`--speculative-alg`) reaches the same setting; and argparse keeps the last value, so an
owned flag repeated in extra_args would silently win. Hence: refuse every owned flag,
its aliases and every prefix of them. (tests/sglang_oracle checks against SGLang's own
parser that no other SGLang flag is such a prefix.)
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from harness.errors import BadInput


def owned_flag(arg: str, reserved: Iterable[str]) -> str | None:
    """The owned flag `arg` would set (itself, an alias or by abbreviation), else None."""
    if not arg.startswith("--") or arg == "--":
        return None
    flag = arg.split("=", 1)[0]
    for owned in sorted(reserved):
        if owned == flag or owned.startswith(flag):
            return owned
    return None


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
