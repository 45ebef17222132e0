"""The registry of secret values: as CI systems mask their registered secrets, every secret
value the harness learns (harness.secrets.found: a suite's, its own environment's and
command line's, a build spec's) is registered once and replaced wherever it appears later,
in every output.

One minimum length. A value shorter than MIN_SECRET_LENGTH is never replaced by value:
a string that short (a port, a word, a hash prefix, a JSON key) occurs in ordinary output
by chance, and replacing it everywhere would garble records and messages. It is still
hidden where it stands (under a secret name or flag, in a URL's userinfo, as a token
shape); a credential is rarely that short.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable

REDACTED = "<redacted>"
MIN_SECRET_LENGTH = 6
_NOT_SECRETS = frozenset({"true", "false", "none", "null", "enabled", "disabled"})
# A value is registered as the runs between these: the placeholder's own brackets (a value
# holding one could otherwise be rebuilt from the placeholder and the text beside it) and
# line ends (a stream masks a line at a time: each line of a value is masked on its own).
_CUTS = re.compile(r"[<>\r\n]+")

_registered: set[str] = set()
_pattern: re.Pattern[str] | None = None


def registrable(run: str) -> bool:
    return not (len(run.strip()) < MIN_SECRET_LENGTH or run in REDACTED
                or run.lower() in _NOT_SECRETS or run.isdigit())


def _forms(value: str) -> set[str]:
    """What is registered of a value: its runs long enough, each also as JSON writes it."""
    runs = [run for run in _CUTS.split(value) if registrable(run)]
    return {form for run in runs for form in (run, json.dumps(run, ensure_ascii=False)[1:-1])}


def register(values: Iterable[object]) -> None:
    """Replace these values (as text, and as JSON writes them) in every output from now on."""
    global _pattern
    added = [form for value in values if value is not None and str(value)
             for form in _forms(str(value)) if form not in _registered]
    if added:
        _registered.update(added)
        # longest first: a secret containing another is replaced whole
        _pattern = re.compile("|".join(map(re.escape, registered())))


def registered() -> tuple[str, ...]:
    return tuple(sorted(_registered, key=lambda value: (-len(value), value)))


def forget() -> None:
    """Clear the registry (tests; a long-lived process between suites)."""
    global _pattern
    _registered.clear()
    _pattern = None


def replace_registered(text: str) -> str:
    """Every registered value in `text` replaced by REDACTED (one pass: a replacement is
    never read again)."""
    return _pattern.sub(REDACTED, text) if _pattern is not None and text else text
