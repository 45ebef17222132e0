"""The reference engine's forward pacing (REFERENCE_TARGET_FORWARD_S): read from the
environment as the engine reads it (a bad value named); with it every target forward takes
at least that long, so an answer streams over measurable time, and nothing it decides
changes: the same tokens and the same accepted drafts per step."""

from __future__ import annotations

import sys
import time

import pytest

from harness.builds import has_reference_dependencies
from reference_engine.pacing import FORWARD_ENV, from_environment, hold_until
from tests.fixtures.sglang_double import REPO


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


@pytest.mark.skipif(not has_reference_dependencies(sys.executable),
                    reason="this environment lacks the reference extra")
def test_paced_forwards_take_their_time_and_decide_nothing() -> None:
    from reference_engine.loading import Options, configure_torch, load_decoder

    configure_torch(1, 1)
    options = Options(target=str(REPO / "reference_engine/tiny/target"),
                      draft=str(REPO / "reference_engine/tiny/draft"))
    decoder, _ = load_decoder(options)
    prompt = "Question: A farmer has 3 cows and buys 4 more. How many cows now?\nAnswer:"
    plain = decoder.generate(prompt, max_new_tokens=48, stop=["Question:"])
    decoder.target_forward_s = 0.02
    started = time.perf_counter()
    paced = decoder.generate(prompt, max_new_tokens=48, stop=["Question:"])
    took = time.perf_counter() - started
    assert (paced.output_ids, paced.accepted_drafts) == (plain.output_ids,
                                                         plain.accepted_drafts)
    forwards = 1 + len(paced.accepted_drafts)  # the prefill, then one per verify step
    assert forwards >= 3 and took >= 0.02 * forwards
