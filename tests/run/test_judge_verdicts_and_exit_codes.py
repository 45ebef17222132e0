"""Judge: verdicts at, above and below the floors, errors for missing figures, exit codes."""

from __future__ import annotations

import pytest

from harness.errors import ExitCode
from harness.results.record import Measurement
from harness.run.judge import EXIT_CODES, judge
from harness.suite.model import Floors

EPS = 1e-9


def _m(accept: float, accuracy: float | None = 0.9, server: float | None = None,
       metric: str = "server_avg", **extra: object) -> Measurement:
    disagreement = None if server is None else (server - accept) / accept
    return Measurement(metric=metric, accept_length=accept, accept_length_server_avg=accept,
                       n_requests=200, n_planned=200, completion_tokens=1000,
                       verify_steps=200, accuracy=accuracy, server_reported_accept_length=server,
                       server_disagreement=disagreement, **extra)


@pytest.mark.parametrize(
    ("accept", "strict", "status"),
    [
        (5.4, False, "pass"),  # SGLang gemma: assertGreaterEqual
        (5.4 + EPS, False, "pass"),
        (5.4 - EPS, False, "fail"),
        (5.4, True, "fail"),  # SGLang qwen/muse: `>`
        (5.4 + EPS, True, "pass"),
        (5.4 - EPS, True, "fail"),
        (5.27, False, "fail"),  # the regression
        (5.6333, False, "pass"),  # after the fix
    ],
)
def test_accept_length_floor(accept: float, strict: bool, status: str) -> None:
    verdict = judge(_m(accept), Floors(accept_length=5.4, strict=strict))
    assert verdict.status == status
    relation = ">" if strict else ">="
    if status == "pass":
        assert f"{relation} floor 5.4" in verdict.reasons[0]
    else:
        assert f"is below the floor: needs {relation} 5.4" in verdict.reasons[0]


def test_exact_ratio_at_the_floor_passes_non_strict() -> None:
    # 27 tokens / 5 steps is the float 5.4 exactly
    assert judge(_m(27 / 5), Floors(accept_length=5.4)).status == "pass"
    assert judge(_m(27 / 5), Floors(accept_length=5.4, strict=True)).status == "fail"


@pytest.mark.parametrize(
    ("accuracy", "strict", "status"),
    [
        (0.75, False, "pass"),
        (0.75 + EPS, False, "pass"),
        (0.75 - EPS, False, "fail"),
        (0.75, True, "fail"),
        (0.75 + EPS, True, "pass"),
    ],
)
def test_accuracy_floor(accuracy: float, strict: bool, status: str) -> None:
    verdict = judge(_m(6.0, accuracy=accuracy), Floors(accept_length=5.4, accuracy=0.75,
                                                       accuracy_strict=strict))
    assert verdict.status == status
    assert any("accuracy" in reason for reason in verdict.reasons)


def test_strictness_is_per_floor_as_sglangs_gate_states_it() -> None:
    """SGLang's Qwen3-8B gate: accept length > 2.8 but score >= 0.75. Exactly 150/200
    correct passes the accuracy floor even though the accept-length floor is strict
    (issue 19, case 5)."""
    qwen = Floors(accept_length=2.8, accuracy=0.75, strict=True)
    verdict = judge(_m(3.1, accuracy=150 / 200), qwen)
    assert verdict.status == "pass", verdict.reasons
    assert "accuracy 0.750 >= floor 0.75" in verdict.reasons[1]
    assert judge(_m(2.8, accuracy=0.9), qwen).status == "fail"  # still > for accept length
    t06 = Floors(accept_length=2.0, accuracy=0.6, strict=True, accuracy_strict=True)
    verdict = judge(_m(2.5, accuracy=120 / 200), t06)
    assert verdict.status == "fail" and "needs > 0.6" in verdict.reasons[1]


@pytest.mark.parametrize(("suite", "entry", "accept_strict", "accuracy_strict"), [
    ("qwen3_8b_dflash", None, False, False),   # >= 95% of z-lab/dflash #7 (no accuracy)
    ("qwen3_8b_dflash", "run_eval", False, False),  # uncalibrated sanity floors
    ("qwen3_8b_dflash", "t06", True, True),    # TestDFlashServerGraphPoolBorrow: > 2.0, > 0.60
    ("muse_glimmer_dflash_gsm8k", None, True, False),  # > 2.5, score >= 0.85
    ("muse_glimmer_dflash_gsm8k", "sgl_eval", True, False),  # the test's own protocol
    ("gemma4_dflash_31b", None, False, False),  # >= 5.4, >= 0.75
])
def test_shipped_suites_state_each_floors_strictness(
        suite: str, entry: str | None, accept_strict: bool, accuracy_strict: bool) -> None:
    from harness.suite.model import load_suite

    loaded = load_suite(suite)
    floors = (loaded.suite.floors if entry is None else
              next(e.floors for e in loaded.suite.workloads if e.name == entry))
    assert (floors.strict, floors.accuracy_strict) == (accept_strict, accuracy_strict)


def test_both_floors_fail_gives_both_reasons() -> None:
    verdict = judge(_m(5.0, accuracy=0.5), Floors(accept_length=5.4, accuracy=0.75))
    assert verdict.status == "fail"
    assert sum("below the floor" in reason for reason in verdict.reasons) == 2


def test_accuracy_floor_without_accuracy_is_an_error() -> None:
    verdict = judge(_m(6.0, accuracy=None), Floors(accept_length=5.4, accuracy=0.75))
    assert verdict.status == "error"
    assert "accuracy floor set but no accuracy measured" in verdict.reasons


def test_no_accuracy_floor_ignores_accuracy() -> None:
    assert judge(_m(6.0, accuracy=None), Floors(accept_length=5.4)).status == "pass"
    assert judge(_m(6.0, accuracy=0.0), Floors(accept_length=5.4)).status == "pass"


def test_missing_measurement_is_an_error() -> None:
    verdict = judge(None, Floors(accept_length=5.4))
    assert verdict.status == "error"
    assert "accept length is missing" in verdict.reasons[0]


def test_exit_codes() -> None:
    assert EXIT_CODES == {"pass": ExitCode.PASS, "fail": ExitCode.BELOW_FLOOR,
                          "error": ExitCode.ENGINE_ERROR, "skipped": ExitCode.SKIPPED}
    assert [int(EXIT_CODES[s]) for s in ("pass", "fail", "error", "skipped")] == [0, 1, 3, 4]


def test_confidence_interval_in_reason() -> None:
    measurement = _m(5.62).model_copy(update={"accept_length_ci": (5.5, 5.75)})
    verdict = judge(measurement, Floors(accept_length=5.4))
    assert verdict.reasons[0] == ("accept length (server_avg) 5.6200 (95% CI 5.500-5.750) "
                                  ">= floor 5.4")


def test_disagreement_note() -> None:
    verdict = judge(_m(5.62, server=5.0), Floors(accept_length=5.4))
    assert verdict.status == "pass"  # the exact figure is judged, not the server's
    note = verdict.reasons[-1]
    assert note.startswith("note: the server's avg_spec_accept_length 5.0000 differs")
    assert "-11.0%" in note


def test_small_disagreement_gives_no_note() -> None:
    verdict = judge(_m(5.62, server=5.60), Floors(accept_length=5.4))
    assert not any(reason.startswith("note:") for reason in verdict.reasons)


def test_no_server_figure_note() -> None:
    verdict = judge(_m(5.62, server=None), Floors(accept_length=5.4))
    assert verdict.reasons[-1] == ("note: the server reported no avg_spec_accept_length "
                                   "(cross-check skipped)")


def test_server_figure_above_floor_does_not_rescue_a_failure() -> None:
    verdict = judge(_m(5.27, server=5.62), Floors(accept_length=5.4))
    assert verdict.status == "fail"


def test_the_floors_definition_is_judged_and_never_mixed() -> None:
    per_request = _m(5.5, metric="per_request")
    verdict = judge(per_request, Floors(accept_length=5.4, metric="server_avg"))
    assert verdict.status == "error"
    assert "never mixed" in verdict.reasons[0]
    assert judge(per_request, Floors(accept_length=5.4, metric="per_request")).status == "pass"


def test_a_partial_run_is_never_a_pass() -> None:
    partial = _m(6.0, partial=True).model_copy(update={"n_requests": 17})
    verdict = judge(partial, Floors(accept_length=5.4))
    assert verdict.status == "error"
    assert "17 of 200 requests finished" in verdict.reasons[0]


@pytest.mark.parametrize("decision", ["pass", "fail"])
def test_sequential_decision_never_overrides_another_floor(decision: str) -> None:
    # --sequential with an accuracy floor of 0.99 and accuracy 0.0: the run fails, whatever
    # the sequential rule settled for accept length.
    verdict = judge(_m(6.0, accuracy=0.0), Floors(accept_length=5.4, accuracy=0.99),
                    sequential=decision)
    assert verdict.status == "fail"
    assert any("accuracy 0.000 is below the floor" in r for r in verdict.reasons)


def test_sequential_decision_judges_accept_length() -> None:
    floors = Floors(accept_length=5.4)
    settled = _m(5.45).model_copy(update={"n_requests": 40})
    assert judge(settled, floors, sequential="fail").status == "fail"
    verdict = judge(settled, floors, sequential="pass")
    assert verdict.status == "pass"
    assert "after 40 of 200 requests" in verdict.reasons[0]


@pytest.mark.parametrize(("accept", "contract"), [(5.6, []), (5.0, []), (5.6, ["layer 0"])])
def test_runtime_attention_difference_is_an_error_over_every_other_finding(
        accept: float, contract: list[str]) -> None:
    """The kernel received other attention than the audit says for this build: whatever the
    floors and the contract say, the measurement is not of the build audited (exit 3), and
    the floors' own reasons are kept beside the difference."""
    from harness.run.judge import Evidence, decide

    floors = Floors(accept_length=5.4, accuracy=0.75)
    clean = decide(Evidence(_m(accept), floors, contract=contract, contract_enforced=False))
    judged = decide(Evidence(_m(accept), floors, contract=contract, contract_enforced=False,
                             runtime_contract=["draft layer 4: causal vs bidirectional"]))
    assert judged.verdict.status == "error"
    assert judged.exit_code == EXIT_CODES["error"]
    assert judged.verdict.reasons[1] == "draft layer 4: causal vs bidirectional"
    assert judged.verdict.reasons[2:] == clean.verdict.reasons
