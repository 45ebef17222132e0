"""An impossible latency figure or request timing is refused by the record's checks
(harness.results.possible), naming the field, never plotted."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.results.checks import BadFile
from harness.results.possible import check_latency, check_request_row, timing_problem
from harness.speculation.bounds import step_bound

SPREAD = {"n": 4, "mean": 0.2, "p50": 0.1, "p90": 0.3, "p99": 0.5,
          "mean_ci": [0.1, 0.3], "p50_ci": [0.05, 0.2]}
GOOD = {"n_requests": 4, "n_timed": 4, "ttft_s": SPREAD, "itl_s": SPREAD,
        "output_tok_s": 100.0, "output_tok_s_ci": [90.0, 110.0], "requests_s": 2.0,
        "duration_s": 2.0, "concurrency": 2, "ci_level": 0.95}


def test_an_honest_summary_passes() -> None:
    check_latency("measurement.latency", GOOD)


@pytest.mark.parametrize(("change", "field"), [
    ({"ttft_s": {**SPREAD, "p50": -0.1}}, "ttft_s.p50"),
    ({"ttft_s": {**SPREAD, "p90": 0.6}}, "percentiles out of order"),
    ({"ttft_s": {**SPREAD, "mean": "0.2"}}, "ttft_s.mean"),
    ({"itl_s": {**SPREAD, "mean_ci": [0.3, 0.4]}}, "outside its own interval"),
    ({"output_tok_s": -1.0}, "output_tok_s"),
    ({"output_tok_s": float("nan")}, "output_tok_s"),
    ({"output_tok_s_ci": [120.0, 130.0]}, "output_tok_s_ci"),
    ({"n_timed": 5}, "n_timed"),
    ({"n_requests": True}, "n_requests"),
    ({"duration_s": -3}, "duration_s"),
])
def test_an_impossible_figure_is_refused_naming_it(change: dict[str, Any], field: str) -> None:
    with pytest.raises(BadFile, match=field):
        check_latency("measurement.latency", {**GOOD, **change})


BLOCK_8 = step_bound("DFLASH", 8, None, None)  # a DFlash verify step of block size 8
ROW = {"question_index": 0, "completion_tokens": 6, "verify_steps": 3, "correct_drafts": 3}


@pytest.mark.parametrize(("timing", "says"), [
    ({"chunk_s": [0.2, 0.1], "ttft_s": 0.2}, "time order"),
    ({"chunk_s": [-0.1], "ttft_s": -0.1}, "non-negative"),
    ({"chunk_s": ["0.1"], "ttft_s": "0.1"}, "non-negative"),
    ({"chunk_s": [0.1, 0.2], "ttft_s": 0.3}, "first arrival"),
    ({"chunk_s": [0.1], "ttft_s": 0.1, "chunk_tokens": [1, 2]}, "chunk_tokens"),
    ("soon", "expected an object"),
])
def test_an_impossible_timing_skips_the_row(timing: Any, says: str) -> None:
    assert says in (check_request_row({**ROW, "timing": timing}, BLOCK_8) or "")


def test_an_honest_timing_keeps_the_row() -> None:
    timing = {"streamed": True, "ttft_s": 0.1, "chunk_s": [0.1, 0.1, 0.3],
              "chunk_tokens": [1, 0, 5]}
    assert check_request_row({**ROW, "timing": timing}, BLOCK_8) is None
    assert check_request_row({**ROW, "timing": None}, BLOCK_8) is None


@settings(max_examples=200, deadline=None)
@given(timing=st.recursive(st.none() | st.booleans() | st.floats() | st.integers() | st.text(),
                           lambda inner: st.lists(inner) | st.dictionaries(
                               st.sampled_from(["chunk_s", "ttft_s", "chunk_tokens", "x"]),
                               inner), max_leaves=20))
def test_any_timing_is_judged_without_a_crash(timing: Any) -> None:
    assert timing_problem(timing) is None or isinstance(timing_problem(timing), str)
