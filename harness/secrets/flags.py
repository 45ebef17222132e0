"""Secret flags: a command-line flag whose value is a credential, in every form argparse (and
so every engine) accepts: `--api-key V`, `--api-key=V`, and any abbreviation `--api-k V`
(argparse takes an unambiguous prefix as the flag); vLLM's `--api_key` too.

Each engine's secret flags are a row of the engines' table (`harness/engine_kinds.py`),
which sits below this package: `secret_flags(kind)` is that engine's row, and
`secret_flags()` the union over every engine, for a command line whose engine is not known.
No import has to hand the table over, so a library call that never loads an engine (a
notebook's `load_suite`) hides the same flags as the CLI.

The harness's own command line has no engine's parser: a flag there is secret when its
name says so (`--api-key`, `--hf-token`: harness.secrets.names), written in full.
"""

from __future__ import annotations

from collections.abc import Iterable

from harness.engine_kinds import ENGINES
from harness.secrets.names import is_secret_name


def secret_flags(kind: str | None = None) -> frozenset[str]:
    """The secret flags of the engine `kind`; of every engine when it is None or not an
    engine the table knows."""
    if kind is not None and kind in ENGINES:
        return ENGINES[kind].secret_flags
    return frozenset().union(*(engine.secret_flags for engine in ENGINES.values()))


def dashed(arg: str) -> str:
    """`--api_key=V` as vLLM's parser reads it: underscores in a flag's name are dashes."""
    flag, sep, value = arg.partition("=")
    return "--" + flag[2:].replace("_", "-") + sep + value if flag.startswith("--") else arg


def resolve_flag(arg: str, flags: Iterable[str]) -> tuple[str, ...]:
    """The flags of `flags` that a command-line argument may set, as argparse resolves it:
    the flag itself when listed (`--flag` or `--flag=value`), else every listed flag it
    abbreviates (argparse takes an unambiguous prefix; an ambiguous one is refused by the
    engine, and is reported here with all its candidates so that no check misses it)."""
    if not arg.startswith("--") or arg == "--":
        return ()
    flag = arg.split("=", 1)[0]
    known = frozenset(flags)
    if flag in known:
        return (flag,)
    return tuple(sorted(f for f in known if f.startswith(flag)))


def is_secret_flag(arg: str, flags: Iterable[str] | None = None, *, own: bool = False) -> bool:
    """Whether `arg` sets a secret flag of an engine's command line (`flags`: that engine's;
    None: any registered engine's). `own`: the harness's own command line instead, read by
    the name rule (its flags abbreviate to `--a`, `--b`: no abbreviation is read there)."""
    spellings = {arg, dashed(arg)}
    if own:
        return any(s.startswith("--") and is_secret_name(s.split("=", 1)[0]) for s in spellings)
    known = secret_flags()
    if any(s.split("=", 1)[0] in known for s in spellings):
        return True  # any registered engine's secret flag, written in full, is one everywhere
    return any(resolve_flag(s, known if flags is None else flags) for s in spellings)
