"""Reporting files the loader cannot use: each one once per command, with path and reason.

A command (one `harness` invocation) runs inside `reporting()`; every load inside it
shares one set of messages already printed, so a bad file read by two loads (both sides
of `compare`, the runs and the baselines of `plot`) is reported once. A load outside any
command opens its own scope: each call reports what it skipped. Messages go to the
`harness.results.store` logger (stderr when logging is not configured).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

_printed: set[str] | None = None
MAX_PRINTED = 10_000  # lines one command prints about skipped files; the rest are counted
_count = 0


@contextmanager
def reporting() -> Iterator[None]:
    """One command's scope: each skip message is printed at most once inside it."""
    global _printed, _count
    outer = _printed
    if outer is None:
        _printed, _count = set(), 0
    try:
        yield
    finally:
        if outer is None and _count > MAX_PRINTED:
            logging.getLogger("harness.results.store").warning(
                "%d more skipped files or lines not printed", _count - MAX_PRINTED)
        _printed = outer


def report(skipped: list[str], path: Path | str, reason: str) -> None:
    """Note an unusable file in `skipped` (always) and print it (once per scope)."""
    global _count
    message = f"skipped {path}: {reason}"
    skipped.append(message)
    if _printed is not None:
        if message in _printed:
            return
        _printed.add(message)
        _count += 1
        if _count > MAX_PRINTED:
            return
    logging.getLogger("harness.results.store").warning(message)
