"""One judge for every verdict path (issue 27): `--sequential` with `--against` stops
only when every floor and the gate have settled (case 1), a contract that differs is
a failure even when the build is measured anyway (case 3)."""

from __future__ import annotations

import numpy as np

from harness.errors import ExitCode
from harness.suite.gate import Gate
from harness.suite.model import Floors
from tests.run.simulated import Truth, reference_of, replay, rows_of, suite_with


def test_sequential_against_never_judges_floors_on_the_gates_prefix() -> None:
    """Case 1: B = A answer for answer (the gate settles "not worse" at the first look
    with certainty), floor 4.0; the first 50 questions average 4.05, all 100 3.8. The
    landed code stopped at 50 on the gate alone and passed the floor on those 50; the
    fixed protocol fails at 3.8 on 100."""
    rng = np.random.default_rng(3)
    noise = np.concatenate([rng.normal(0.05, 1.0, 50), rng.normal(-0.45, 1.0, 50)])
    noise[:50] += 0.05 - noise[:50].mean()
    noise[50:] += -0.45 - noise[50:].mean()
    rows = rows_of(Truth(accept=4.0, position1=1.0), 100, 0, shared=noise)
    suite = suite_with(Floors(accept_length=4.0), Gate(relative_drop=0.02))
    a = reference_of(rows, suite.name)
    fixed, _ = replay(suite, rows, sequential=False, reference=a)
    assert fixed.verdict.status == "fail" and fixed.exit_code == ExitCode.BELOW_FLOOR
    sequential, sent = replay(suite, rows, sequential=True, reference=a)
    assert sent == 100, "stopped before the floor settled"
    assert sequential.verdict.status == "fail" and sequential.exit_code == fixed.exit_code
    assert sequential.paired["result"]["decision"] == "not_worse"
    assert sequential.paired["floors_status"] == "fail"


def test_a_gate_failure_stops_early_and_leaves_open_floors_unjudged() -> None:
    """B 10% worse than A on every question, floor far below: the gate settles "worse"
    at the first look; the floor still open there is reported open, never "below"."""
    a_rows = rows_of(Truth(accept=4.0), 200, 1)
    suite = suite_with(Floors(accept_length=4.0), Gate(relative_drop=0.02))
    rng = np.random.default_rng(1)
    noise = rng.normal(0.0, 0.6, 200)
    b_rows = rows_of(Truth(accept=3.6), 200, 1, shared=noise)
    judged, sent = replay(suite, b_rows, sequential=True, reference=reference_of(a_rows,
                                                                                  suite.name))
    assert judged.verdict.status == "fail"
    assert judged.paired["result"]["decision"] == "worse"
    if sent < 200 and judged.paired["floors_status"] == "open":
        assert any("still open" in reason for reason in judged.verdict.reasons)


def test_a_contract_that_differs_fails_even_when_measured_anyway() -> None:
    """Case 3: the reference side of a nightly release line is measured with the
    contract not enforced; a draft whose attention differs must not record a pass."""
    rows = rows_of(Truth(accept=4.0), 60, 2)
    suite = suite_with(Floors(accept_length=2.0))
    differs = ["layer 0: causal expected, bidirectional served"]
    measured, _ = replay(suite, rows, sequential=False, contract=differs,
                         enforce_contract=False)
    assert measured.verdict.status == "fail" and measured.exit_code == ExitCode.BELOW_FLOOR
    assert "contract differs (not enforced" in measured.verdict.reasons[0]
    enforced, _ = replay(suite, rows, sequential=False, contract=differs)
    assert enforced.verdict.status == "fail"
    clean, _ = replay(suite, rows, sequential=False, enforce_contract=False)
    assert clean.verdict.status == "pass"


def test_floors_are_never_judged_on_a_prefix_a_callers_rule_chose() -> None:
    """A bisect step's rule stops its run early: the floors on that prefix stay open (the
    record never passes on them), whatever its point estimate says."""
    from pathlib import Path

    from harness.metrics.measure import summarise
    from harness.run.judge import judge_entry
    from harness.run.runner import RunOptions

    rows = rows_of(Truth(accept=4.0), 100, 4)
    suite = suite_with(Floors(accept_length=2.0))
    measurement = summarise(rows[:50], "server_avg", 1.0, None, planned=100)
    measurement.stopped_early = True
    options = RunOptions(results_dir=Path("/nonexistent"), stop_rule=object())
    judged = judge_entry(suite, options, measurement, rows[:50])
    assert judged.verdict.status == "fail"
    assert any("still open" in reason for reason in judged.verdict.reasons)
    measurement = summarise(rows, "server_avg", 1.0, None, planned=100)  # ran to the end
    assert judge_entry(suite, options, measurement, rows).verdict.status == "pass"
