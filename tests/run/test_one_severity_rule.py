"""One severity rule and one home for every exit code (`harness.run.exit_codes`): a suite's
entries, a report over series, a sweep, the audit's engines and a bisect all rank their
statuses the same way (a failure first, then an error, then skipped, else pass) and take
their codes from the one `ExitCode` enum."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.errors import EXIT_CODE_MEANINGS, ExitCode
from harness.run.exit_codes import (
    EXIT_CODES,
    SEVERITY,
    bisect_exit,
    check_exit,
    input_exit,
    report_status,
    status_of_exit,
    sweep_exit,
    worst_exit,
    worst_status,
)
from harness.run.outcome import RunOutcome, combined

STATUSES = ("pass", "skipped", "error", "fail")


def _outcome(status: str, code: ExitCode | None = None) -> RunOutcome:
    return RunOutcome(status, code if code is not None else EXIT_CODES[status],  # type: ignore[arg-type,index]
                      [f"{status} entry"])


@given(st.lists(st.sampled_from(STATUSES), min_size=1))
def test_entries_and_reports_rank_statuses_alike(statuses: list[str]) -> None:
    """The suite's outcome over its entries is the report's status over the same verdicts
    (the report counts a skipped host as a pass, which only `run` reports with 4)."""
    suite = combined([_outcome(status) for status in statuses])
    assert suite.status == worst_status(statuses)  # type: ignore[arg-type]
    report = report_status(statuses)  # type: ignore[arg-type]
    assert report == ("pass" if suite.status == "skipped" else suite.status)
    assert suite.exit_code is EXIT_CODES[suite.status]


def test_a_failed_entry_outranks_an_errored_one() -> None:
    """Before, a suite's entries put an error first and the reports a failure: one rule."""
    for order in itertools.permutations(["pass", "error", "fail"]):
        suite = combined([_outcome(status) for status in order])
        assert (suite.status, suite.exit_code) == ("fail", ExitCode.BELOW_FLOOR)
    assert [s for s, _ in sorted(SEVERITY.items(), key=lambda item: item[1])] == \
        ["pass", "skipped", "error", "fail"]


def test_an_entrys_own_error_code_is_kept() -> None:
    suite = combined([_outcome("pass"), _outcome("error", ExitCode.VERSION_REJECTS)])
    assert (suite.status, suite.exit_code) == ("error", ExitCode.VERSION_REJECTS)


def test_codes_rank_by_the_statuses_they_stand_for() -> None:
    assert [status_of_exit(code) for code in ExitCode] == \
        ["pass", "fail", "error", "error", "skipped", "error", "error", "error", "error"]
    assert worst_exit([ExitCode.VERSION_REJECTS, ExitCode.BELOW_FLOOR]) is ExitCode.BELOW_FLOOR
    assert worst_exit([ExitCode.ENGINE_ERROR, ExitCode.VERSION_REJECTS]) is \
        ExitCode.VERSION_REJECTS
    assert worst_exit([ExitCode.PASS, ExitCode.VERSION_REJECTS]) is ExitCode.VERSION_REJECTS
    assert worst_exit([]) is ExitCode.PASS


@pytest.mark.parametrize(("statuses", "run_status", "run_code", "code"), [
    (["pass", "pass"], "pass", ExitCode.PASS, ExitCode.PASS),
    (["pass", "fail", "error"], "fail", ExitCode.BELOW_FLOOR, ExitCode.BELOW_FLOOR),
    (["error", "error"], "error", ExitCode.VERSION_REJECTS, ExitCode.VERSION_REJECTS),
    (["error", "pass"], "error", ExitCode.ENGINE_ERROR, ExitCode.ENGINE_ERROR),
    (["skipped"], "skipped", ExitCode.SKIPPED, ExitCode.SKIPPED),
])
def test_a_sweep_keeps_a_skip_and_a_rejection(statuses: list[str], run_status: str,
                                              run_code: ExitCode, code: ExitCode) -> None:
    assert sweep_exit(statuses, run_status, run_code) is code  # type: ignore[arg-type]


def test_bisect_and_check_codes_are_the_enums() -> None:
    assert [bisect_exit(s) for s in ("found", "no difference", "not narrowed")] == \
        [ExitCode.PASS, ExitCode.NO_DIFFERENCE, ExitCode.NOT_NARROWED]
    assert (int(ExitCode.NO_DIFFERENCE), int(ExitCode.NOT_NARROWED)) == (6, 7)
    assert [check_exit(False), check_exit(True), check_exit(True, rejected=True)] == \
        [ExitCode.PASS, ExitCode.BELOW_FLOOR, ExitCode.VERSION_REJECTS]
    assert [input_exit(False), input_exit(True)] == [ExitCode.PASS, ExitCode.BAD_INPUT]
    assert set(EXIT_CODE_MEANINGS) == set(ExitCode)
