"""A line on stderr every few seconds while the run waits (an engine build, a server
loading its weights, a workload being driven), so a long wait is never silence.

The line is made when it is printed (`describe(elapsed_s)`): what the wait is at now,
e.g. the server log's last line while it loads. `HARNESS_HEARTBEAT_S` sets the period
(default 10 s; 0 turns the lines off).
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from harness.secrets import plain

HEARTBEAT_ENV = "HARNESS_HEARTBEAT_S"
DEFAULT_PERIOD_S = 10.0
LINE_CHARS = 160


def period_s() -> float:
    try:
        return max(0.0, float(os.environ.get(HEARTBEAT_ENV, DEFAULT_PERIOD_S)))
    except ValueError:
        return DEFAULT_PERIOD_S


def say(line: str) -> None:
    """One line on stderr, now (the run's progress lines and the heartbeat's)."""
    print(line, file=sys.stderr, flush=True)


@contextlib.contextmanager
def heartbeat(describe: Callable[[float], str | None],
              say: Callable[[str], None] = say) -> Iterator[None]:
    """While the block runs, `say(describe(elapsed))` every period (nothing when the
    block ends sooner, or when `describe` returns None for that beat)."""
    every = period_s()
    if every <= 0:
        yield
        return
    done = threading.Event()
    started = time.monotonic()

    def beat() -> None:
        while not done.wait(every):
            with contextlib.suppress(Exception):  # a heartbeat never fails the run
                line = describe(time.monotonic() - started)
                if line and not done.is_set():
                    say(line)

    thread = threading.Thread(target=beat, name="heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join(timeout=1.0)


def last_log_line(path: Path, skip: tuple[str, ...] = ("[harness]",)) -> str | None:
    """The last non-blank line of a log (what the server says it is doing), one line of
    printable text, redacted and shortened; None when the log is empty or unreadable."""
    try:
        with open(path, "rb") as log:
            log.seek(0, os.SEEK_END)
            log.seek(max(0, log.tell() - 16384))
            tail = log.read().decode("utf-8", errors="replace")
    except OSError:
        return None
    for line in reversed(tail.splitlines()):
        text = " ".join(plain(line).split())
        if text and not text.startswith(skip):
            return text if len(text) <= LINE_CHARS else text[:LINE_CHARS - 3] + "..."
    return None
