"""The CLI's streams: sys.stdout and sys.stderr, for the whole command, redacted and with
their control characters escaped (`guarded_streams`, installed by `harness.cli.main`), so
that nothing printed, by the harness or a library it calls, shows a secret or restyles the
terminal."""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import TextIO

from harness.secrets.controls import CSI, escape
from harness.secrets.redact import redact_text
from harness.secrets.shapes import PRIVATE_KEY_BEGIN, PRIVATE_KEY_END

HOLD_CHARS = 65536  # a line longer than this is written in parts


def _escape_stream(text: str, terminal: bool) -> str:
    """escape(), but on a terminal the CSI sequences its styling needs pass (a progress
    bar's cursor moves, colours); OSC (titles, links), lone ESC and the rest never do."""
    if not terminal or "\x1b[" not in text:
        return escape(text.replace("\r\n", "\n")) if "\r" not in text or not terminal \
            else _keep_cr(text)  # fmt: skip
    parts, last = [], 0
    for match in CSI.finditer(text):
        parts.append(_keep_cr(text[last:match.start()]))
        parts.append(match.group(0))
        last = match.end()
    parts.append(_keep_cr(text[last:]))
    return "".join(parts)


def _keep_cr(text: str) -> str:
    """On a terminal a carriage return redraws a progress line: kept there."""
    return "\r".join(escape(part) for part in text.split("\r"))


def _open_key(text: str) -> int | None:
    """Where a private key block begins that has no END line yet, or None."""
    begins = list(PRIVATE_KEY_BEGIN.finditer(text))
    if not begins or PRIVATE_KEY_END.search(text, begins[-1].end()):
        return None
    return begins[-1].start()


class GuardedStream(io.TextIOBase):
    """A text stream that redacts and escapes what is written to it, line by line (a secret
    split over two writes within a line is still caught)."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self._pending = ""

    def write(self, text: str) -> int:
        self._pending += text
        if "\n" not in self._pending and len(self._pending) <= HOLD_CHARS:
            return len(text)
        head, sep, rest = self._pending.rpartition("\n")
        if len(rest) > HOLD_CHARS:
            head, sep, rest = self._pending, "", ""
        ready = head + sep
        opened = _open_key(ready)  # a private key is held whole, to its END line
        if opened is not None and len(self._pending) <= HOLD_CHARS:
            ready, rest = ready[:opened], ready[opened:] + rest
        self._pending = rest
        self._emit(ready)
        return len(text)

    def _emit(self, text: str) -> None:
        if text:
            # a terminal, or a log that asked for the terminal's colours (rich honours it);
            # an escape is redacted again: it may spell a registered value
            terminal = self.isatty() or bool(os.environ.get("FORCE_COLOR"))
            self.stream.write(redact_text(_escape_stream(redact_text(text), terminal)))

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
