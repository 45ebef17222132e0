"""The settings check every adapter makes: what the server reports of its speculative
settings against what the suite declares (an unreported setting is a problem too, unless
the suite says why it may be skipped)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

UNREPORTED_HINT = ("the server cannot be shown to run the suite's settings (set "
                   "engine.unreported_settings_ok to a reason to skip this check)")


def same_model(reported: object, declared: str) -> bool:
    """A hub id stays as given, or becomes a hub-cache snapshot path
    (`models--org--name/snapshots/...`); a local folder may be reported resolved."""
    if not isinstance(reported, str):
        return False
    if reported == declared:
        return True
    if "/" in declared and f"models--{declared.replace('/', '--')}" in reported:
        return True
    try:
        return Path(reported).resolve() == Path(declared).resolve()
    except OSError:
        return False


def mismatches(reported: Mapping[str, object], expected: Mapping[str, object],
               unreported_ok: str | None, *, source: str, prefix: str = "",
               is_model: Callable[[str], bool], equal: Callable[[object, object], bool]
               ) -> list[str]:
    """One line per declared setting (`expected`: key -> value, None: not declared) that
    `reported` (the server's own account, read from `source`) lacks or contradicts."""
    problems = []
    for key, value in expected.items():
        if value is None:
            continue
        if reported.get(key) is None:
            if unreported_ok is None:
                problems.append(f"{source} does not report {key} (the suite declares "
                                f"{value!r}); {UNREPORTED_HINT}")
            continue
        got = reported[key]
        if not (same_model(got, str(value)) if is_model(key) else equal(got, value)):
            problems.append(f"{prefix}{key} is {got!r}, the suite declares {value!r}")
    return problems
