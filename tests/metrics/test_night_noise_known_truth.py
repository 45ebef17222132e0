"""`night_noise`: one night's engine noise measured by pairing nights question by question,
and `answer_changes`: how far one build's nights are from bit-reproducible, against the
known truth of simulated nights (`simulate.simulate_nights`)."""

from __future__ import annotations

import numpy as np
import pytest

from harness.analysis.simulate import simulate_nights
from harness.metrics import stats
from harness.metrics.night_noise import answer_changes, night_noise


def test_the_engine_noise_is_the_night_to_night_sd_of_the_figure() -> None:
    """With no host shift, the sd of R_i over 300 nights is what the pairs measure."""
    tokens, steps = simulate_nights(7, nights=300, questions=100, host_sd=0.0)
    noise = night_noise(tokens, steps)
    assert noise.questions == 100 and len(noise.pair_se) == 299
    assert noise.engine_se == pytest.approx(float(np.std(noise.figures, ddof=1)), rel=0.12)


def test_the_question_draw_is_not_night_noise() -> None:
    """Questions that differ a lot (sd 1.5) but an engine that barely varies: the engine
    noise is a fraction of what each night's CI over questions would say."""
    tokens, steps = simulate_nights(3, nights=8, questions=100, prompt_sd=1.5,
                                    engine_sd=0.05, host_sd=0.0)
    noise = night_noise(tokens, steps)
    assert noise.engine_se < 0.5 * stats.standard_error(tokens[0], steps[0])


def test_identical_answers_have_no_engine_noise_and_a_build_change_does_not_add_any() -> None:
    tokens, steps = simulate_nights(1, nights=1, questions=50)
    other, _ = simulate_nights(2, nights=1, questions=50)
    nights = np.concatenate([tokens] * 4 + [other] * 3)
    noise = night_noise(nights, np.concatenate([steps] * 7))
    assert noise.engine_se == 0.0  # the median pair: one build's repeats
    assert max(noise.pair_se) > 0  # the pair across the change


def test_answer_changes_count_the_answers_that_differ_from_the_usual_one() -> None:
    """An engine that repeats its answers but for 5% of them (real SGLang on CPU, greedy:
    NGRAM's drafts move with timing): the share is measured, and nothing changes at 0."""
    tokens, steps = simulate_nights(4, nights=40, questions=100, changed=0.05)
    found = answer_changes(tokens, steps)
    assert found.cells == 4000
    assert 0.04 <= found.share <= 0.06  # a fresh draw rarely repeats the usual answer
    assert found.questions_changed > 50 and found.change_rms > 0.3
    assert found.question_sd == pytest.approx(0.75, rel=0.3)  # simulate_prompts' prompt_sd
    same, counts = simulate_nights(4, nights=6, questions=100, changed=0.0)
    assert (same == same[0]).all()
    assert answer_changes(same, counts).changed == 0
    assert answer_changes(same, counts).change_rms == 0.0


def test_deviating_nights_are_counted_with_the_share_of_their_answers() -> None:
    """Some nights deviate (20%), each on 30% of its answers: both are measured."""
    tokens, steps = simulate_nights(6, nights=200, questions=50, changed=0.3,
                                    changed_nights=0.2)
    found = answer_changes(tokens, steps)
    assert found.nights == 200 and 0.13 <= found.nights_changed / 200 <= 0.27
    assert 0.25 <= found.share_on_changed_nights <= 0.33
    assert found.share == pytest.approx(found.share_on_changed_nights
                                        * found.nights_changed / 200)


def test_a_drop_with_repeated_answers_repeats_the_new_builds_first_night() -> None:
    tokens, _ = simulate_nights(5, nights=6, questions=50, drop=0.5, at=3, changed=0.0)
    assert (tokens[:3] == tokens[0]).all() and (tokens[3:] == tokens[3]).all()
    assert tokens[3].sum() < tokens[0].sum()


@pytest.mark.parametrize(("tokens", "steps"), [
    ([[5, 6]], [[2, 2]]),  # one night
    ([[5, 6], [5]], [[2, 2], [2]]),  # a night with a question fewer
    ([[5], [6]], [[2], [2]]),  # one question
])
def test_nights_that_cannot_be_paired_are_refused(tokens: list, steps: list) -> None:
    with pytest.raises(ValueError, match=r"night|question"):
        night_noise(tokens, steps)
