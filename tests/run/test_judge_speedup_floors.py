"""The one judge on speedup floors: at, above and below each floor, in its own definition;
a speedup floor or a declared [speedup] without its figure is an error, never a pass; the
sequential rule leaves a speedup floor open at every early look (its figure comes after)."""

from __future__ import annotations

import pytest

from harness.metrics.floor_checks import NoEarlySample, floor_checks
from harness.results.record import Measurement, Speedup
from harness.run.judge import Evidence, decide, judge, speedup_missing
from harness.run.sequential import early_decision
from harness.suite.model import Floors, parse_suite
from tests.suite.test_impossible_suites import REFERENCE


def measured(tpot: float | None, throughput: float | None, note: str | None = None
             ) -> Measurement:
    found = Speedup(n_prompts=10, tpot=tpot, throughput=throughput, note=note,
                    tpot_ci=None if tpot is None else (tpot * 0.9, tpot * 1.1))
    return Measurement(metric="server_avg", accept_length=3.0, accept_length_server_avg=3.0,
                       n_requests=10, n_planned=10, completion_tokens=100, verify_steps=40,
                       server_reported_accept_length=3.0, server_disagreement=0.0,
                       speedup=found)


FLOORS = Floors(accept_length=2.0, speedup_tpot=1.5, speedup_throughput=1.2)


@pytest.mark.parametrize(("tpot", "throughput", "status", "says"), [
    (1.5, 1.2, "pass", "speedup_tpot (speedup_tpot) 1.5000 (95% CI 1.350-1.650), 10 prompts "
                       "paired >= floor 1.5"),
    (2.0, 1.3, "pass", "speedup_throughput (speedup_throughput) 1.3000"),
    (1.49, 1.3, "fail", "speedup_tpot (speedup_tpot) 1.4900 (95% CI 1.341-1.639), 10 prompts "
                        "paired is below the floor: needs >= 1.5"),
    (2.0, 1.1, "fail", "is below the floor: needs >= 1.2"),
])
def test_each_speedup_floor_is_judged_in_its_definition(tpot: float, throughput: float,
                                                        status: str, says: str) -> None:
    verdict = judge(measured(tpot, throughput), FLOORS)
    assert verdict.status == status
    assert any(says in reason for reason in verdict.reasons), verdict.reasons


def test_a_speedup_floor_without_its_figure_is_an_error() -> None:
    verdict = judge(measured(None, 1.3, note="the target-alone run failed: server exited"),
                    FLOORS)
    assert verdict.status == "error"
    assert "the target-alone run failed: server exited" in "\n".join(verdict.reasons)
    verdict = judge(Measurement(metric="server_avg", accept_length=3.0, n_requests=1,
                                n_planned=1), FLOORS)
    assert verdict.status == "error" and "no target-alone run" in verdict.reasons[0]


def test_a_declared_baseline_without_a_figure_is_an_error_with_no_floor() -> None:
    suite, _ = parse_suite(REFERENCE + '\n[speedup]\nbaseline = "target_only"\n', "s.toml")
    missing = speedup_missing(suite, measured(None, None, note="no question paired"))
    assert missing and "no question paired" in missing[0]
    judged = decide(Evidence(measured(None, None), suite.floors, missing=missing))
    assert judged.verdict.status == "error" and int(judged.exit_code) == 3
    # a failed floor stays a failure, the missing figure named beside it
    low = Floors(accept_length=9.0)
    assert decide(Evidence(measured(None, None), low, missing=missing)).verdict.status == "fail"
    assert speedup_missing(suite, measured(1.4, 1.1)) == []


def test_the_sequential_rule_leaves_a_speedup_floor_open() -> None:
    checks = [c for c in floor_checks(FLOORS) if c.kind.startswith("speedup")]
    assert [c.key for c in checks] == ["speedup_tpot", "speedup_throughput"]
    assert all(isinstance(c.sample([]), NoEarlySample) for c in checks)
    assert all(early_decision(None, c, []) is None for c in checks)  # type: ignore[arg-type]
