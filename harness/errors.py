"""Exceptions that end a command, each mapped to the documented exit code.

The CLI prints the message of a `HarnessError` (no traceback) and exits with
its `exit_code`; anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from enum import IntEnum
from types import FrameType


class ExitCode(IntEnum):
    PASS = 0
    BELOW_FLOOR = 1
    BAD_INPUT = 2
    ENGINE_ERROR = 3
    SKIPPED = 4
    VERSION_REJECTS = 5  # the SGLang version's own code raised on the draft config
    NO_DIFFERENCE = 6  # bisect: GOOD and BAD do not differ significantly: nothing to bisect
    NOT_NARROWED = 7  # bisect: skipped or undecided commits leave several candidates
    INTERRUPTED = 130


# What each exit code means, as `harness --help` prints it and README's table says it
# (tests/test_cli_startup.py holds the two together). Which code a command exits with is
# decided in one place, harness.run.exit_codes.
EXIT_CODE_MEANINGS: dict[ExitCode, str] = {
    ExitCode.PASS: "pass (or a dry run)",
    ExitCode.BELOW_FLOOR: "below a floor, the draft's contract differs from the suite's, or "
                          "the paired gate fails",
    ExitCode.BAD_INPUT: "bad input: a malformed suite, a missing file or model, a bad flag "
                        "or build spec",
    ExitCode.ENGINE_ERROR: "engine or infrastructure error: launch failed, server died or "
                           "hung, a figure missing, a partial run, a run with no readable "
                           "record",
    ExitCode.SKIPPED: "skipped: the suite's topology does not fit this host",
    ExitCode.VERSION_REJECTS: "the engine release's own code rejects the draft config",
    ExitCode.NO_DIFFERENCE: "bisect: GOOD and BAD do not differ",
    ExitCode.NOT_NARROWED: "bisect: skipped commits leave several candidates",
    ExitCode.INTERRUPTED: "interrupted (Ctrl-C, SIGTERM): the server tree is killed and the "
                          "record kept",
}


class HarnessError(Exception):
    """An expected failure with a message meant for the user."""

    exit_code: ExitCode = ExitCode.ENGINE_ERROR

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class BadInput(HarnessError):
    """The user gave something unusable: a malformed suite, a missing file, a bad flag."""

    exit_code = ExitCode.BAD_INPUT


class SuiteError(BadInput):
    """A suite document that does not validate; the message names file and field."""


class EngineError(HarnessError):
    """The engine or the infrastructure failed: launch, HTTP, a missing metric."""

    exit_code = ExitCode.ENGINE_ERROR


class MissingMetric(EngineError):
    """A figure the verdict needs was not reported; never a pass."""


class TopologySkip(HarnessError):
    """This host cannot run the suite (e.g. `needs 2 x H100, found 0`)."""

    exit_code = ExitCode.SKIPPED


class Interrupted(HarnessError):
    """Ctrl-C or SIGTERM; raised after cleanup so the run ends cleanly."""

    exit_code = ExitCode.INTERRUPTED


class Terminated(KeyboardInterrupt):
    """SIGTERM (CI cancelling a job), unwound like Ctrl-C. A KeyboardInterrupt on purpose:
    asyncio lets one through a running request untouched, where any other exception raised
    by a signal handler inside a request ends up wrapped in an exception group."""

    def __init__(self, signum: int) -> None:
        self.message = f"stopped by signal {signal.Signals(signum).name}"
        super().__init__(self.message)


class _Termination:
    """The SIGTERM being handled, kept until the run unwinds: Python only prints an
    exception raised where it cannot propagate (a weakref callback during garbage
    collection, a __del__), so a Terminated raised there is lost; the measurement's
    watchdog raises it again from here (harness.run.drive)."""

    signum: int | None = None


TERMINATION = _Termination()


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM (CI cancelling a job) unwinds like Ctrl-C, so cleanup always runs. The CLI
    holds it for a whole command, so a SIGTERM landing anywhere (a run already recorded,
    its lines still printing) ends in the interrupted exit, never the signal's default
    kill; a run holds it again around its own work (the pytest plugin calls runs directly)."""

    def handler(signum: int, _frame: FrameType | None) -> None:
        TERMINATION.signum = signum  # kept: the raise may land where it is swallowed
        raise Terminated(signum)

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread: leave signals to whoever owns them
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
        TERMINATION.signum = None


def interruption_text(error: BaseException) -> str:
    """What stopped the run: the signal's own words, Ctrl-C otherwise."""
    if isinstance(error, Terminated | HarnessError):
        return error.message
    return "interrupted (SIGINT)"


def error_text(error: BaseException) -> str:
    """An exception as a message that is never empty (httpx.ReadError('') has no text):
    its message, or its type's name when the message is empty."""
    return str(error).strip() or type(error).__name__
