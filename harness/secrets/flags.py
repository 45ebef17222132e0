"""Secret flags: a command-line flag whose value is a credential, in every form argparse (and
so every engine) accepts: `--api-key V`, `--api-key=V`, and any abbreviation `--api-k V`
(argparse takes an unambiguous prefix as the flag); vLLM's `--api_key` too.

Each engine adapter declares its own secret flags (`EngineAdapter.secret_flags`, once, in
harness/engines). This package sits below the engines, so the engines' registry hands it
its table when it is imported (`use_engine_flags`): `secret_flags(kind)` is then that
engine's list, and `secret_flags()` the union over every registered adapter, for a command
line whose engine is not known. An adapter in the registry is in the union; there is no
second list to forget it in.

Who installs the table. The CLI and the pytest plugin import the registry first. A
library call (`load_suite` in a notebook, a script reading records) enters through a lower
folder and never imports the engines, and this package may not import them (it sits below
them: tests/layout/test_imports.py). So the package's metadata names the table instead:
the entry point `harness.engine_flags` (pyproject.toml) points at the registry, and the
first question asked before any import installed it loads it from there, only from this
distribution's own metadata. Where the harness is not installed (no metadata, no entry
point) it refuses with a message saying so, rather than guess.

The harness's own command line has no engine's parser: a flag there is secret when its
name says so (`--api-key`, `--hf-token`: harness.secrets.names), written in full.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from importlib.metadata import entry_points

from harness.secrets.names import is_secret_name

EngineFlags = Callable[[str | None], frozenset[str]]
ENTRY_POINT_GROUP = "harness.engine_flags"  # pyproject.toml [project.entry-points]
DISTRIBUTION = "spec-harness"
_engine_flags: EngineFlags | None = None


def use_engine_flags(table: EngineFlags) -> None:
    """The engines' registry: kind -> that adapter's secret flags; None -> the union."""
    global _engine_flags
    _engine_flags = table


def secret_flags(kind: str | None = None) -> frozenset[str]:
    """The secret flags of the engine `kind`; of every registered engine when it is None
    or not an engine the registry knows."""
    table = _engine_flags
    if table is None:
        table = _declared_table()
        use_engine_flags(table)
    return table(kind)


def _canonical(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def _declared_table() -> EngineFlags:
    """The engines' table as this distribution's metadata names it (loading it imports
    the registry, which installs it too)."""
    for point in entry_points(group=ENTRY_POINT_GROUP):
        if point.dist is not None and _canonical(point.dist.name) == DISTRIBUTION:
            table: EngineFlags = point.load()
            return table
    raise RuntimeError(f"harness.secrets: no engine registry: the {DISTRIBUTION} package is "
                       f"not installed with its metadata (entry point {ENTRY_POINT_GROUP}); "
                       "install it (pip install -e .) or import harness.engines.registry "
                       "first")


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
