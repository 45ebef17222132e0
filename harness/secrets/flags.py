"""Secret flags: a command-line flag whose value is a credential, in every form argparse (and
so every engine) accepts: `--api-key V`, `--api-key=V`, and any abbreviation `--api-k V`
(argparse takes an unambiguous prefix as the flag); vLLM's `--api_key` too.

Each engine adapter declares its own secret flags (`EngineAdapter.secret_flags`, once, in
harness/engines). This package sits below the engines, so the engines' registry hands it
its table when it is imported (`use_engine_flags`): `secret_flags(kind)` is then that
engine's list, and `secret_flags()` the union over every registered adapter, for a command
line whose engine is not known. An adapter in the registry is in the union; there is no
second list to forget it in. Asked before the registry was imported, it refuses rather
than guess.

The harness's own command line has no engine's parser: a flag there is secret when its
name says so (`--api-key`, `--hf-token`: harness.secrets.names), written in full.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from harness.secrets.names import is_secret_name

EngineFlags = Callable[[str | None], frozenset[str]]
_engine_flags: EngineFlags | None = None


def use_engine_flags(table: EngineFlags) -> None:
    """The engines' registry: kind -> that adapter's secret flags; None -> the union."""
    global _engine_flags
    _engine_flags = table


def secret_flags(kind: str | None = None) -> frozenset[str]:
    """The secret flags of the engine `kind`; of every registered engine when it is None
    or not an engine the registry knows."""
    if _engine_flags is None:
        raise RuntimeError("harness.secrets: no engine registry yet (import "
                           "harness.engines.registry first): the secret flags are its")
    return _engine_flags(kind)


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
