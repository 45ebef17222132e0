"""Every exit code the harness decides, in one place: the judge's (`harness.run.judge`
turns a run's evidence into its verdict; this module says which code a verdict, a report
over several, a protocol's result or a check's finding exits with). Commands return what
these functions return, never a number of their own (`tests/layout/test_exit_codes.py`).
Light on purpose (`harness.errors` only): `harness list` and `validate` decide through it
without loading the judge's models.

The one severity rule (`SEVERITY`), wherever several statuses make one (a suite's
entries, a sweep's points, `paired` and `trend` over series, `--fail-on-drop` over the
compared series, the paired gate's findings, the audit's engines): a failure first (it
names what to fix), then an error (a verdict that could not be reached is never hidden
behind a pass), then a host the suite did not fit, else pass.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from harness.errors import ExitCode

if TYPE_CHECKING:
    from harness.results.record import VerdictStatus

SEVERITY: dict[VerdictStatus, int] = {"pass": 0, "skipped": 1, "error": 2, "fail": 3}

EXIT_CODES: dict[VerdictStatus, ExitCode] = {
    "pass": ExitCode.PASS,
    "fail": ExitCode.BELOW_FLOOR,
    "error": ExitCode.ENGINE_ERROR,
    "skipped": ExitCode.SKIPPED,
}


def worst_status(statuses: Iterable[VerdictStatus]) -> VerdictStatus:
    """The status several make, by `SEVERITY` (the first of the worst); pass for none."""
    return max(statuses, key=SEVERITY.__getitem__, default="pass")


def report_status(statuses: Iterable[VerdictStatus]) -> VerdictStatus:
    """The status of a report over several verdicts (`harness paired` and `harness trend`
    over each series' latest run, `--fail-on-drop` over each compared series): the worst
    by `SEVERITY`, a skipped latest run counted as a pass (the host did not fit, which
    only `run` itself reports with exit 4)."""
    worst = worst_status(statuses)
    return "pass" if worst == "skipped" else worst


def report_exit(statuses: Iterable[VerdictStatus]) -> ExitCode:
    """The exit code of `report_status`."""
    return EXIT_CODES[report_status(statuses)]


def status_of_exit(code: ExitCode) -> VerdictStatus:
    """The status an exit code stands for: 0 pass, 1 fail, 4 skipped, any other an error
    (3, 5 the release's own code rejects the draft, 130 interrupted, ...)."""
    found: dict[ExitCode, VerdictStatus] = {ExitCode.PASS: "pass",
                                            ExitCode.BELOW_FLOOR: "fail",
                                            ExitCode.SKIPPED: "skipped"}
    return found.get(code, "error")


def worst_exit(codes: Iterable[ExitCode]) -> ExitCode:
    """The code several checks' codes make (the audit's SGLang side and vLLM's): the worst
    by `SEVERITY` of the statuses they stand for; between two errors the higher code
    (5, the release's own code, over 3)."""
    return max(codes, key=lambda code: (SEVERITY[status_of_exit(code)], int(code)),
               default=ExitCode.PASS)


def sweep_exit(statuses: Iterable[VerdictStatus], run_status: VerdictStatus,
               run_code: ExitCode) -> ExitCode:
    """A sweep's exit code: the report's over its points and its gate (`report_exit`),
    except a host the suite does not fit (4) and a draft the release's own code rejects
    (5), which keep the run's own code (`run_status`, `run_code`: its launch's outcome)."""
    if run_status == "skipped":
        return ExitCode.SKIPPED
    code = report_exit(statuses)
    if code == ExitCode.ENGINE_ERROR and run_code == ExitCode.VERSION_REJECTS:
        return run_code
    return code


def bisect_exit(status: str) -> ExitCode:
    """`harness bisect`'s exit code from its result's status: "found" passes; "no
    difference" (GOOD and BAD do not differ: nothing to bisect) is 6; anything else
    (skipped or undecided commits leave several candidates) is 7."""
    if status == "found":
        return ExitCode.PASS
    return ExitCode.NO_DIFFERENCE if status == "no difference" else ExitCode.NOT_NARROWED


def check_exit(differs: bool, rejected: bool = False) -> ExitCode:
    """A check of something against what it should be (the draft's contract against the
    suite's or a release's, a rebuild against the shipped checkpoints): 5 when the
    release's own code rejects the draft config, else 1 when it differs, else 0."""
    if rejected:
        return ExitCode.VERSION_REJECTS
    return ExitCode.BELOW_FLOOR if differs else ExitCode.PASS


def input_exit(unusable: bool) -> ExitCode:
    """A listing or validation of the user's files: 2 when any is unusable, else 0."""
    return ExitCode.BAD_INPUT if unusable else ExitCode.PASS
