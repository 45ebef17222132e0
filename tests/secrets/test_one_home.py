"""One home for secrets (issue 37): what a secret is, the registry of values, the redactor
and the control-character escape live in `harness/secrets/`; no other module keeps its own
credential or control-character pattern, its own placeholder, its own list of secret flags
or its own minimum length."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "harness"
HOME = PACKAGE / "secrets"

# What a private redaction or escape looks like in source: a control-character class or
# escape sequence in a pattern, a URL-userinfo pattern, the placeholder written out, a
# token prefix, a hand-kept list of secret flags, a minimum secret length.
PRIVATE = {
    "control-character pattern": re.compile(r"\\x1b\\\[|\[\\x00-|\\x7f|\\x9b"),
    "URL credential pattern": re.compile(r"://\[\^|:\[\^/"),
    "placeholder written out": re.compile(r"<redacted>"),
    "token shape": re.compile(r"ghp_|github_pat_|eyJ\[|xox\[|AKIA"),
    "hand-kept secret flags": re.compile(r"^SECRET_FLAGS\s*[:=]", re.M),
    "minimum secret length": re.compile(r"MIN_SECRET\w*\s*[:=]|len\([^)]*\)\s*>=\s*4\b"),
}


def _sources() -> list[Path]:
    return sorted(path for path in PACKAGE.rglob("*.py") if HOME not in path.parents)


@pytest.mark.parametrize("what", sorted(PRIVATE))
def test_no_private_secret_handling_outside_the_package(what: str) -> None:
    pattern = PRIVATE[what]
    found = [f"{path.relative_to(PACKAGE.parent)}:{text.count(chr(10), 0, match.start()) + 1}"
             for path in _sources()
             for text in [path.read_text(encoding="utf-8")]
             for match in pattern.finditer(text)
             if not (what == "hand-kept secret flags" and _an_adapter_s(path))]
    assert found == [], f"{what} outside harness/secrets: {found}"


def _an_adapter_s(path: Path) -> bool:
    """An engine adapter declares its own secret flags (once): harness/engines/*."""
    return (PACKAGE / "engines") in path.parents


def test_the_old_homes_are_gone() -> None:
    assert not (PACKAGE / "mask.py").exists()
    assert not (PACKAGE / "suite" / "secrets.py").exists()


def test_one_minimum_length_stated_once() -> None:
    from harness import secrets

    definitions = [path for path in HOME.rglob("*.py")
                   if re.search(r"^MIN_SECRET_LENGTH\s*[:=]", path.read_text(), re.M)]
    assert len(definitions) == 1
    shortest = "Zq9" + "x" * (secrets.MIN_SECRET_LENGTH - 3)
    secrets.register([shortest[:-1], shortest])
    assert secrets.registered() == (shortest,)
    # the values a server log is filtered with are the registry's: no other threshold
    assert secrets.redact_text(f"{shortest[:-1]} {shortest}") == \
        f"{shortest[:-1]} {secrets.REDACTED}"
