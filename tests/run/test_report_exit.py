"""The reports' exit policy has one home (`judge.report_exit`): a failure first, then an
error, else pass; `harness paired` and `harness trend` both count their rows through it."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.errors import ExitCode
from harness.run.judge import report_exit, report_status

STATUSES = ("pass", "fail", "error", "skipped")


@pytest.mark.parametrize(("statuses", "code"), [
    ([], ExitCode.PASS),
    (["pass", "skipped"], ExitCode.PASS),
    (["pass", "error"], ExitCode.ENGINE_ERROR),
    (["error", "fail", "pass"], ExitCode.BELOW_FLOOR),  # a failure first
    (["fail"], ExitCode.BELOW_FLOOR),
])
def test_a_failure_first_then_errors_else_pass(statuses: list[str], code: ExitCode) -> None:
    assert report_exit(statuses) is code  # type: ignore[arg-type]


@given(st.lists(st.sampled_from(STATUSES)))
def test_any_statuses(statuses: list[str]) -> None:
    code = report_exit(statuses)  # type: ignore[arg-type]
    assert isinstance(code, ExitCode)
    if "fail" in statuses:
        assert code is ExitCode.BELOW_FLOOR and report_status(statuses) == "fail"  # type: ignore[arg-type]
    elif "error" in statuses:
        assert code is ExitCode.ENGINE_ERROR
    else:
        assert code is ExitCode.PASS
    assert report_exit(reversed(statuses)) is code  # type: ignore[arg-type]  # order-free


@pytest.mark.parametrize(("shown", "named", "status"), [
    ("pass", False, "pass"), ("fail", True, "fail"), ("error", False, "error"),
    ("no paired run", True, "error"), ("not paired", True, "error"),
    ("no paired run", False, "pass"),  # found by listing: another series' business
    ("something new", False, "error"),  # a status no reader knows is never a pass
])
def test_paired_rows_as_the_policy_counts_them(shown: str, named: bool, status: str) -> None:
    from harness.commands.paired import _status

    assert _status(shown, named) == status


@pytest.mark.parametrize(("verdict", "alarm", "status"), [
    ("pass", False, "pass"), ("pass", True, "fail"),  # an open drop in the history fails
    ("fail", False, "fail"), ("error", False, "error"), ("skipped", False, "skipped"),
    (None, False, "error"),  # a suite named without a run tonight
])
def test_trend_rows_as_the_policy_counts_them(verdict: str | None, alarm: bool,
                                              status: str) -> None:
    from harness.commands.trend import _status

    item = SimpleNamespace(verdict=verdict, overdue=None, trend=SimpleNamespace(alarm=alarm))
    assert _status(item) == status  # type: ignore[arg-type]


def test_the_reports_return_no_literal_exit_code() -> None:
    """paired and trend returned 1/3 (and ExitCode members) of their own: the policy was
    written twice. Now every exit code of those reports is `report_exit`'s."""
    import ast
    from pathlib import Path

    import harness.commands

    folder = Path(harness.commands.__file__).parent
    for name in ("paired.py", "trend.py", "ab.py", "compare.py"):
        tree = ast.parse((folder / name).read_text(encoding="utf-8"))
        literal = [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Return)
                   and isinstance(node.value, ast.Constant) and isinstance(node.value.value, int)]
        assert literal == [], f"{name} returns a literal exit code at lines {literal}"
