"""The soak's statistics (harness.metrics.drift) on rows of known truth: a repeated
workload with no drift is within any tolerance, a planted linear fall of 10% over the run
is caught beyond a 5% tolerance and its size recovered, noise alone passes, and each row
falls in the window it finished in (late ones in the last); no trend without repeats."""

from __future__ import annotations

import random

import pytest

from harness.metrics.drift import (
    describe,
    drift_test,
    status_of,
    window_count,
    window_figures,
    window_of,
)
from harness.results.record import RequestRow

DURATION = 60.0


def _row(index: int, question: int, finished: float, accept: float, steps: int = 20
         ) -> RequestRow:
    """A row whose server_avg is `accept`: correct drafts + steps over steps."""
    correct = round((accept - 1.0) * steps)
    return RequestRow(index=index, question_index=question, completion_tokens=correct + steps,
                      verify_steps=steps, correct_drafts=correct,
                      spec_accept_length=(correct + steps) / steps, latency_s=0.5,
                      finished_s=finished)


def _soak(fall: float, noise: float = 0.0, questions: int = 8, passes: int = 12,
          seed: int = 0) -> list[RequestRow]:
    """Questions of levels 3..5 asked in order, pass after pass over DURATION; accept
    length falls by `fall` (a share) over the run, with per-request noise."""
    draw = random.Random(seed)
    rows = []
    total = questions * passes
    for n in range(total):
        t = DURATION * (n + 0.5) / total
        level = 3.0 + 2.0 * (n % questions) / questions
        value = level * (1.0 - fall * t / DURATION) + draw.gauss(0.0, noise)
        rows.append(_row(n, n % questions, t, max(value, 1.0), steps=200))
    return rows


def test_a_steady_soak_is_within_and_exactly_zero() -> None:
    result = drift_test(_soak(0.0), "server_avg", DURATION, max_drift=0.05, alpha=0.05)
    assert result.decision == "within" and result.drift == pytest.approx(0.0, abs=1e-12)
    assert result.n_questions == 8 and status_of(result.decision, "fail") == "pass"


def test_a_planted_fall_is_caught_and_sized() -> None:
    result = drift_test(_soak(0.10, noise=0.05), "server_avg", DURATION, 0.05, 0.05)
    assert result.decision == "beyond" and result.drift_ci[1] < -0.05
    assert result.drift == pytest.approx(-0.10, abs=0.02)  # the truth: -10% over the run
    line = describe(result, status_of(result.decision, "pass"))
    assert "fell by more than the tolerance" in line and "server_avg" in line


def test_a_small_fall_inside_the_tolerance_passes() -> None:
    result = drift_test(_soak(0.01, noise=0.05), "server_avg", DURATION, 0.05, 0.05)
    assert result.decision == "within" and result.drift_ci[0] > -0.05


@pytest.mark.parametrize("seed", range(20))
def test_noise_alone_is_not_called_a_fall(seed: int) -> None:
    result = drift_test(_soak(0.0, noise=0.3, seed=seed), "server_avg", DURATION, 0.05, 0.05)
    assert result.decision != "beyond"


def test_too_few_questions_asked_again_has_no_trend() -> None:
    once = [_row(n, n, DURATION * n / 10, 4.0) for n in range(10)]  # no question repeats
    with pytest.raises(ValueError, match="asked again"):
        drift_test(once, "server_avg", DURATION, 0.05, 0.05)


def test_rows_fall_in_the_window_they_finished_in() -> None:
    assert window_count(60.0, 15.0) == 4 and window_count(10.0, 3.0) == 4
    assert window_of(0.0, 60.0, 15.0) == 0 and window_of(15.0, 60.0, 15.0) == 1
    assert window_of(61.3, 60.0, 15.0) == 3  # in flight at the end: the last window
    rows = [_row(0, 0, 1.0, 5.0), _row(1, 1, 2.0, 3.0), _row(2, 0, 20.0, 4.0),
            _row(3, 1, 70.0, 2.0)]
    figures = window_figures(rows, "server_avg", 60.0, 15.0)
    assert [f.n_requests for f in figures] == [2, 1, 0, 1]
    assert figures[0].accept_length == pytest.approx(4.0)  # pooled: (5 + 3) / 2 at 20 steps
    assert figures[2].accept_length is None and figures[2].ci is None  # empty: no figure
    assert figures[3].end_s == 60.0


def test_a_row_without_its_finishing_time_is_named() -> None:
    row = _row(7, 0, 1.0, 4.0).model_copy(update={"finished_s": None})
    with pytest.raises(ValueError, match="request 7 has no finished_s"):
        window_figures([row], "server_avg", 60.0, 15.0)
