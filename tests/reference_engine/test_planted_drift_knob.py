"""The reference engine's planted drift (REFERENCE_DRAFT_NOISE_DRIFT): read from the
environment as the engine reads it (a bad value named), the noise rate rising with serving
time and capped at 1, and off (the engine as it always was) when unset or 0."""

from __future__ import annotations

import pytest

from reference_engine.draft_noise import DraftNoise
from reference_engine.noise_drift import DRIFT_ENV, from_environment, rate_after


@pytest.mark.parametrize(("value", "drift"), [("", 0.0), ("0", 0.0), (" 0.03 ", 0.03),
                                              ("1e-3", 0.001)])
def test_the_environment_sets_it(value: str, drift: float) -> None:
    assert from_environment({DRIFT_ENV: value}) == drift
    assert from_environment({}) == 0.0


@pytest.mark.parametrize("value", ["fast", "-0.1", "nan", "inf"])
def test_a_bad_value_is_named(value: str) -> None:
    with pytest.raises(ValueError, match=DRIFT_ENV):
        from_environment({DRIFT_ENV: value})


def test_the_rate_rises_with_serving_time_and_stops_at_one() -> None:
    noise = DraftNoise(rate=0.1, seed=0, drift_per_s=0.02)
    rates = [noise.rate_after(seconds) for seconds in (0.0, 10.0, 20.0, 100.0)]
    assert rates == pytest.approx([0.1, 0.3, 0.5, 1.0])
    assert DraftNoise(rate=0.1).rate_after(1e6) == 0.1  # no drift: the rate as set
    assert rate_after(0.0, 0.5, -3.0) == 0.0  # a clock read before the start: no drift yet
