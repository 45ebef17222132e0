"""One mask for every output: registered secret values, credential patterns, and control
characters (standard library only: imported at CLI start-up, below every other folder).

As CI systems mask their registered secrets, every secret value the harness learns (a suite's
secret flags and variables, URL credentials, query tokens, `Bearer` values, the harness's own
environment and command line: `harness.suite.secrets` finds them) is `register`ed at load
time, and `mask` replaces each wherever it appears: in every stream the CLI prints to
(`guarded_streams`, installed by `harness.cli.main`) and every file the harness writes
through `harness.results` (run.json, request rows, the index, baselines, calibrations). On
top of the registry, patterns catch what was never registered: a URL's password (also in
a URL a path joined down to one slash, `https:/user:pw@host`), a token in a query string,
an `Authorization` value, a JWT.

`escape` makes text that came from files (record text, suite text) safe to print: C0 and C1
controls (ESC, NUL, BEL, backspace), DEL and the bidirectional overrides (U+202E ...)
become visible escapes (`\\x1b`, `\\u202e`); newline and tab stay. `shown` is both, and
is what every printing path uses.
"""

from __future__ import annotations

import io
import json
import os
import re
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from typing import Any, TextIO

REDACTED = "<redacted>"
MIN_SECRET = 6  # shorter values are masked by name and pattern only, never by value
_NOT_SECRETS = frozenset({"true", "false", "none", "null", "enabled", "disabled"})

_registered: set[str] = set()
_ordered: tuple[str, ...] = ()


def register(values: Iterable[Any]) -> None:
    """Mask these values (as text, and as JSON writes them) in every output from now on."""
    global _ordered
    added = False
    for value in values:
        text = str(value) if value is not None else ""
        if len(text.strip()) < MIN_SECRET or text in _registered or REDACTED in text \
                or text in REDACTED or text.lower() in _NOT_SECRETS or text.isdigit():
            continue
        _registered.add(text)
        escaped = json.dumps(text, ensure_ascii=False)[1:-1]
        if escaped != text:
            _registered.add(escaped)
        added = True
    if added:  # longest first, so a secret containing another is replaced whole
        _ordered = tuple(sorted(_registered, key=len, reverse=True))


def registered() -> tuple[str, ...]:
    return _ordered


def forget() -> None:
    """Clear the registry (tests; a long-lived process between suites)."""
    global _ordered
    _registered.clear()
    _ordered = ()


# ------------------------------------------------------------------ patterns

# scheme:[/]/userinfo@ ; userinfo up to the last @ before the host (a password may hold
# '@'); one slash too: a URL joined as a path (`Path("https://u:p@h")` is `https:/u:p@h`)
URL_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*):(?P<slashes>//?)"
                          r"(?P<user>[^/?#\s:]*)(?::(?P<password>[^/?#\s]*))?@"
                          r"(?=[^/?#\s@]*(?:[/?#\s]|$))")
# Schemes whose user part is a login name, never a credential (keys authenticate).
NAME_ONLY_SCHEMES = re.compile(r"(^|\+)(ssh|sftp|scp)$", re.I)
# ?token=..., &api_key=..., ;sig=...: a query parameter whose name says it is a credential
QUERY_SECRET = re.compile(
    r"(?P<lead>[?&;](?:[A-Za-z0-9_.-]*[_.-])?)(?P<name>token|access_token|id_token|auth|"
    r"api[_-]?key|apikey|key|secret|password|passwd|pwd|sig|signature|credential|jwt|"
    r"session|code)=(?P<value>[^&#\s\"']+)", re.I)
# Authorization: Bearer ..., Basic ... (a value with a digit: not a word of prose)
AUTH_VALUE = re.compile(r"(?P<lead>\b(?:Bearer|Basic)\s+)"
                        r"(?P<value>(?=[A-Za-z._~+/=-]*[0-9])[A-Za-z0-9._~+/=-]{8,})", re.I)
# a JSON Web Token, and the well-known token formats of the hubs and forges
TOKEN_SHAPES = re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*|"
                          r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{20,}|\bgithub_pat_[A-Za-z0-9_]{20,}|"
                          r"\bhf_[A-Za-z0-9]{20,}|\bglpat-[A-Za-z0-9_-]{20,}|"
                          r"\bxox[abprs]-[A-Za-z0-9-]{10,}|\bsk-[A-Za-z0-9_-]{20,}")


def url_secret(match: re.Match[str]) -> str | None:
    """The secret part of one URL's userinfo, or None when it holds none."""
    if match.group("password") is not None:
        return match.group("password") or None
    if NAME_ONLY_SCHEMES.search(match.group("scheme")):
        return None
    return match.group("user") or None


def _url_replacement(match: re.Match[str]) -> str:
    scheme, slashes, user = match.group("scheme"), match.group("slashes"), match.group("user")
    if match.group("password") is not None:
        return f"{scheme}:{slashes}{user}:{REDACTED}@"
    if url_secret(match) is None:
        return match.group(0)
    return f"{scheme}:{slashes}{REDACTED}@"


def redact_url(text: str) -> str:
    """`https://user:TOKEN@host` -> `https://user:<redacted>@host`; `https://TOKEN@host` ->
    `https://<redacted>@host`; `git+ssh://git@host` unchanged."""
    return URL_USERINFO.sub(_url_replacement, text)


def pattern_secrets(text: str) -> list[str]:
    """Every secret value the patterns find in a text (to register)."""
    found = [s for m in URL_USERINFO.finditer(text) if (s := url_secret(m))]
    found += [m.group("value") for m in QUERY_SECRET.finditer(text)]
    found += [m.group("value") for m in AUTH_VALUE.finditer(text)]
    found += [m.group(0) for m in TOKEN_SHAPES.finditer(text)]
    return found


def looks_secret(value: str) -> bool:
    """A value that is a credential whatever its name (`Bearer ...`, a JWT, a hub token)."""
    return bool(AUTH_VALUE.search(value) or TOKEN_SHAPES.search(value))


def mask(text: str) -> str:
    """Registered values, then the patterns, replaced by REDACTED."""
    if not text:
        return text
    for secret in _ordered:
        if secret in text:
            text = text.replace(secret, REDACTED)
    text = redact_url(text)
    text = QUERY_SECRET.sub(lambda m: f"{m.group('lead')}{m.group('name')}={REDACTED}", text)
    text = AUTH_VALUE.sub(lambda m: f"{m.group('lead')}{REDACTED}", text)
    return TOKEN_SHAPES.sub(REDACTED, text)


# ------------------------------------------------------------------ control characters

_BIDI = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f" + _BIDI + "\u2028\u2029]")
# what a terminal's own styling writes (rich on a terminal): CSI sequences
_CSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group(0))
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def escape(text: str) -> str:
    """Control characters (ESC, NUL, CR, BEL...), DEL, C1 and bidirectional overrides as
    visible escapes; newline and tab kept."""
    return _CONTROLS.sub(_visible, text)


def shown(text: Any) -> str:
    """What may be printed of a text: masked and escaped."""
    return escape(mask(str(text)))


def _escape_stream(text: str, terminal: bool) -> str:
    """escape(), but on a terminal the CSI sequences its styling needs pass (a progress
    bar's cursor moves, colours); OSC (titles, links), lone ESC and the rest never do."""
    if not terminal or "\x1b[" not in text:
        return escape(text.replace("\r\n", "\n")) if "\r" not in text or not terminal \
            else _keep_cr(text)  # fmt: skip
    parts, last = [], 0
    for match in _CSI.finditer(text):
        parts.append(_keep_cr(text[last:match.start()]))
        parts.append(match.group(0))
        last = match.end()
    parts.append(_keep_cr(text[last:]))
    return "".join(parts)


def _keep_cr(text: str) -> str:
    """On a terminal a carriage return redraws a progress line: kept there."""
    return "\r".join(escape(part) for part in text.split("\r"))


class GuardedStream(io.TextIOBase):
    """A text stream that masks and escapes what is written to it, line by line (a secret
    split over two writes within a line is still caught)."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self._pending = ""

    def write(self, text: str) -> int:
        self._pending += text
        if "\n" in self._pending or len(self._pending) > 65536:
            head, sep, self._pending = self._pending.rpartition("\n")
            self._emit(head + sep)
        return len(text)

    def _emit(self, text: str) -> None:
        if text:
            # a terminal, or a log that asked for the terminal's colours (rich honours it)
            terminal = self.isatty() or bool(os.environ.get("FORCE_COLOR"))
            self.stream.write(_escape_stream(mask(text), terminal))

    def flush(self) -> None:
        pending, self._pending = self._pending, ""
        self._emit(pending)
        self.stream.flush()

    def isatty(self) -> bool:
        try:
            return bool(self.stream.isatty())
        except (AttributeError, ValueError):
            return False

    def fileno(self) -> int:
        return self.stream.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.stream, "encoding", "utf-8")

    @property
    def errors(self) -> str | None:  # type: ignore[override]
        return getattr(self.stream, "errors", None)

    def writable(self) -> bool:
        return True


@contextmanager
def guarded_streams() -> Iterator[None]:
    """sys.stdout and sys.stderr masked and escaped inside the block (the CLI's whole
    command), flushed and restored after it."""
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = GuardedStream(saved[0]), GuardedStream(saved[1])
    try:
        yield
    finally:
        for stream in (sys.stdout, sys.stderr):
            with suppress(OSError, ValueError):
                stream.flush()
        sys.stdout, sys.stderr = saved
