"""The reference engine's forward pacing (REFERENCE_TARGET_FORWARD_S): read from the
environment as the engine reads it (a bad value named), and a hold that ends the least time
after its start. That paced forwards take their time and decide nothing is held on the
decoder itself, beside the other in-process decoding check
(tests/reference_engine/test_policies_and_draft_noise.py)."""

from __future__ import annotations

import time

import pytest

from reference_engine.pacing import FORWARD_ENV, from_environment, hold_until


@pytest.mark.parametrize(("value", "seconds"), [("", 0.0), ("0", 0.0), (" 0.025 ", 0.025),
                                                ("1e-2", 0.01), ("10", 10.0)])
def test_the_environment_sets_it(value: str, seconds: float) -> None:
    assert from_environment({FORWARD_ENV: value}) == seconds
    assert from_environment({}) == 0.0


@pytest.mark.parametrize("value", ["slow", "-0.1", "nan", "inf", "10.5", "1e400"])
def test_a_bad_value_is_named(value: str) -> None:
    with pytest.raises(ValueError, match=FORWARD_ENV):
        from_environment({FORWARD_ENV: value})


def test_a_hold_ends_the_least_time_after_the_start_and_never_waits_twice() -> None:
    started = time.perf_counter()
    hold_until(started, 0.05)
    assert time.perf_counter() - started >= 0.05
    late = time.perf_counter() - 1.0
    before = time.perf_counter()
    hold_until(late, 0.05)  # the work took longer already
    assert time.perf_counter() - before < 0.05
