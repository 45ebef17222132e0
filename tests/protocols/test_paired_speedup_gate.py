"""The paired speedup gate in the one judge: with `[speedup] max_drop`, a run against a
reference build is judged on each speedup too (B's against A's, paired by question), its
decision judged as the accept-length gate's is; a reference or a run without a speedup to
pair is an error, never a pass; the finding is recorded and every reader accepts it."""

from __future__ import annotations

import json

import pytest

from harness.metrics.paired_gate import Tolerance, paired_test
from harness.metrics.speedup import GATED
from harness.protocols import pairing
from harness.results import possible
from harness.results.record import PairedFinding, Speedup
from harness.run.judge import Evidence, PairedEvidence, SpeedupEvidence, decide
from harness.suite.gate import Gate
from harness.suite.model import Floors, load_suite
from harness.suite.speedup import SpeedupSetting
from tests.metrics.test_paired_speedup_gate import A_ALONE, A_SPEC, build
from tests.run.test_judge_verdicts_and_exit_codes import _m as measured

GATE = Gate(relative_drop=0.05)
AGAINST = {"run_id": "ref", "path": "/r/ref", "spec": "reference:noise=0", "reused": False}
BASE = load_suite("tiny_dflash_speedup_cpu").suite
SUITE = BASE.model_copy(update={"speedup": SpeedupSetting(baseline="target_only",
                                                          max_drop=0.1)})


def same_accept_length() -> object:
    tokens, steps = [40, 50, 45, 38], [10, 10, 10, 10]
    return paired_test((tokens, steps), (tokens, steps), Tolerance(0.05, True, "server_avg"))


def judged(speedup: list[SpeedupEvidence], gate: Gate = GATE, floor: float = 1.0):
    evidence = Evidence(measured(4.0, accuracy=None), Floors(accept_length=floor),
                        paired=PairedEvidence(same_accept_length(), gate, AGAINST, speedup))
    return decide(evidence)


def reference(speedup: Speedup | None) -> pairing.Reference:
    from pathlib import Path

    return pairing.Reference(SUITE.name, Path("/r/ref"), "ref", "reference:noise=0", False,
                             speedup=speedup)


def evidence(a: Speedup | None, b: Speedup | None, suite=SUITE) -> list[SpeedupEvidence]:
    return pairing.speedup_evidence(suite, reference(a), b, GATE.alpha)


def test_equal_speedups_pass_and_are_recorded_for_every_reader() -> None:
    a = build(A_SPEC, A_ALONE)
    found = judged(evidence(a, a))
    assert found.verdict.status == "pass" and int(found.exit_code) == 0
    reasons = "\n".join(found.verdict.reasons)
    assert "speedup gate (speedup_tpot) PASS" in reasons
    assert "speedup gate (speedup_throughput) PASS" in reasons
    assert found.paired is not None
    assert [s["figure"] for s in found.paired["speedup"]] == list(GATED)
    possible.check_paired(json.loads(json.dumps(found.paired)), 100.0)
    finding = PairedFinding.model_validate(found.paired)
    assert finding.speedup is not None and finding.speedup[0].decision == "not_worse"
    assert finding.speedup[0].definition and "1 - max_drop" in finding.speedup[0].definition


def test_a_speedup_shown_below_the_tolerance_fails_while_accept_length_passes() -> None:
    a = build(A_SPEC, A_ALONE)
    b = build([t * 2 for t in A_SPEC], A_ALONE)
    found = judged(evidence(a, b))
    assert found.verdict.status == "fail" and int(found.exit_code) == 1
    assert found.paired is not None and found.paired["status"] == "pass"  # accept length's
    statuses = {s["figure"]: s["status"] for s in found.paired["speedup"]}
    assert statuses["speedup_tpot"] == "fail"
    assert any(r.startswith("speedup gate (speedup_tpot) FAIL") for r in found.verdict.reasons)


@pytest.mark.parametrize(("a", "b", "why"), [
    (None, "b", "the reference run ref has no speedup over its target alone"),
    ("a", None, "this run has no speedup over its target alone"),
    ("failed", "b", "A has no per-question speedup sums"),
])
def test_no_speedup_to_pair_is_an_error_never_a_pass(a: str | None, b: str | None,
                                                     why: str) -> None:
    sides = {"a": build(A_SPEC, A_ALONE), "b": build(A_SPEC, A_ALONE), None: None,
             "failed": Speedup(n_prompts=0, note="recorded before the gate")}
    found = judged(evidence(sides[a], sides[b]))
    assert found.verdict.status == "error" and int(found.exit_code) == 3
    assert any(why in r and "never a pass" in r for r in found.verdict.reasons)
    assert found.paired is not None
    assert all(s["status"] == "error" and why in s["reason"] for s in found.paired["speedup"])
    possible.check_paired(json.loads(json.dumps(found.paired)), 100.0)


def test_a_failed_speedup_is_reported_before_a_missing_one() -> None:
    a = build(A_SPEC, A_ALONE)
    slow = build([t * 2 for t in A_SPEC], A_ALONE)
    found = judged([*evidence(a, slow)[:1], SpeedupEvidence("speedup_throughput", None, "x")])
    assert found.verdict.status == "fail"


def test_an_inconclusive_speedup_is_judged_by_the_gates_setting() -> None:
    a = build(A_SPEC, A_ALONE)
    b = build([t * k for t, k in zip(A_SPEC, [0.5, 1.6, 0.6, 1.5, 0.55, 1.7, 0.5, 1.6],
                                     strict=True)], A_ALONE)
    gated = evidence(a, b)
    assert gated[0].result is not None and gated[0].result.decision == "inconclusive"
    assert judged(gated[:1], Gate(relative_drop=0.05, inconclusive="pass")).verdict.status \
        == "pass"
    assert judged(gated[:1], Gate(relative_drop=0.05, inconclusive="fail")).verdict.status \
        == "fail"


def test_a_failed_floor_stands_over_a_passing_speedup() -> None:
    a = build(A_SPEC, A_ALONE)
    assert judged(evidence(a, a), floor=9.0).verdict.status == "fail"


def test_a_suite_without_max_drop_gates_no_speedup() -> None:
    a = build(A_SPEC, A_ALONE)
    assert evidence(a, a, suite=BASE) == []
    found = judged([])
    assert found.paired is not None and "speedup" not in found.paired
