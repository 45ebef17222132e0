"""The two accept-length definitions, checked against SGLang's own code (0.5.17 and 0.5.23).

Synthetic GSM8K-like requests (stop strings, some cut by max_new_tokens) go through the
release's finish check, per-request counting, server counters and meta_info
(`sglang_code`); the figures the harness computes from meta_info must equal SGLang's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from .sglang_code import SGLang
from .simulate import Plan, Running, Scheduler, plan_for

STOP = ("Question", "Assistant:", "<|separator|>")  # SGLang's GSM8K gate sends these


def max_new_tokens(i: int) -> int:
    """Every 7th request is cut by max_new_tokens, and every 50th (from the 4th) by a
    limit of 1: it ends at prefill with 0 verify steps, and SGLang gives it no spec
    fields. The rest stop at "Question"."""
    return 1 if i % 50 == 3 else 40 if i % 7 == 0 else 512


def gsm8k_like(n: int = 200, block: int = 16, accept: float = 5.6) -> list[Plan]:
    return [plan_for(f"q{i}", f"Question: synthetic {i}\nAnswer:", max_new_tokens(i),
                     STOP, accept, block) for i in range(n)]


def metas(items: Sequence[Running]) -> list[dict[str, Any]]:
    return [item.result for item in items]


# The definitions as the harness states them (PLAN "Two accept-length definitions"), over
# the requests SGLang gives spec fields (those with a verify step).
def spec_rows(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in rows if "spec_verify_ct" in r]


def server_avg(rows: Sequence[dict[str, Any]]) -> float:
    rows = spec_rows(rows)
    correct = sum(r["spec_num_correct_drafts"] for r in rows)
    steps = sum(r["spec_verify_ct"] for r in rows)
    return (correct + steps) / steps


def per_request(rows: Sequence[dict[str, Any]]) -> float:
    rows = spec_rows(rows)
    return sum(r["completion_tokens"] for r in rows) / sum(r["spec_verify_ct"] for r in rows)


def test_server_avg_is_sglang_server_average_over_the_window(
        make_sglang: Callable[..., SGLang]) -> None:
    # Folding every iteration and no overlap overshoot: SGLang's figure is the exact one.
    sglang = make_sglang(decode_log_interval=1)
    items = Scheduler(sglang, overlap=False).run(gsm8k_like())
    assert sglang.server_average() == pytest.approx(server_avg(metas(items)), rel=1e-12)


def test_flush_resets_the_server_average(make_sglang: Callable[..., SGLang]) -> None:
    sglang = make_sglang(decode_log_interval=1)
    scheduler = Scheduler(sglang, overlap=False)
    scheduler.run(gsm8k_like(20))  # warm-up
    sglang.reset()
    assert sglang.server_average() is None  # the key is absent, as after a fresh launch
    items = scheduler.run(gsm8k_like(60)[20:])
    assert sglang.server_average() == pytest.approx(server_avg(metas(items)), rel=1e-12)


def test_folding_lags_by_the_unfolded_iterations(make_sglang: Callable[..., SGLang]) -> None:
    folded, exact = make_sglang(decode_log_interval=40), make_sglang(decode_log_interval=1)
    # 8 at a time: enough decode iterations for a few folds
    slow = Scheduler(folded, overlap=False, max_running=8)
    fast = Scheduler(exact, overlap=False, max_running=8)
    plans = gsm8k_like(60)
    for plan in plans:
        slow.add(plan)
        fast.add(plan)
    history = []
    while not slow.idle:
        slow.iterate()
        fast.iterate()
        history.append(exact.server_average())
        if slow.decode_iterations < 40:
            assert folded.server_average() is None  # nothing folded in yet
    assert slow.decode_iterations > 40 and slow.decode_iterations % 40 != 0
    last_fold = slow.decode_iterations // 40 * 40
    assert folded.server_average() == pytest.approx(history[last_fold - 1], rel=1e-12)
    assert folded.server_average() != pytest.approx(history[-1], rel=1e-9)


def test_overlap_overshoot_counts_in_the_server_average_only(
        make_sglang: Callable[..., SGLang]) -> None:
    """SGLang's overlap scheduler (its GPU default) verifies a request once more after a stop
    finished it; that row reaches update_spec_metrics but no request's meta_info."""
    sglang = make_sglang(decode_log_interval=1)
    items = Scheduler(sglang, overlap=True).run(gsm8k_like())
    overshoots = sum(item.overshoot for item in items)
    steps = sum(r["spec_verify_ct"] for r in spec_rows(metas(items)))
    assert overshoots > 0
    assert sglang.reporter.spec_total_num_forward_ct == steps + overshoots
    assert sglang.server_average() != pytest.approx(server_avg(metas(items)), rel=1e-6)


def test_per_request_is_pooled_meta_spec_accept_length(
        make_sglang: Callable[..., SGLang]) -> None:
    items = Scheduler(make_sglang(), overlap=False).run(gsm8k_like())
    rows = spec_rows(metas(items))
    weighted = sum(r["spec_accept_length"] * r["spec_verify_ct"] for r in rows)
    assert per_request(rows) == pytest.approx(weighted / sum(r["spec_verify_ct"] for r in rows),
                                              rel=1e-12)


def test_completion_minus_one_undercounts_when_the_last_step_is_cut(
        make_sglang: Callable[..., SGLang]) -> None:
    """Per request: completion_tokens - 1 = correct drafts + verify steps - tokens accepted
    after the stop or the length limit (SGLang counts the whole last step, but returns the
    output only through the stop). So Σ(completion - 1)/Σverify is not the server figure."""
    items = Scheduler(make_sglang(), overlap=False).run(gsm8k_like())
    cut_by = {"stop": 0, "length": 0}
    for item in items:
        row, req = item.result, item.req
        cut = len(req.output_ids) - len(req.output_ids_through_stop)
        assert row["completion_tokens"] - 1 == (
            row.get("spec_num_correct_drafts", 0) + row.get("spec_verify_ct", 0) - cut)
        if cut:
            cut_by[row["finish_reason"]["type"]] += 1
    assert cut_by["stop"] > 0 and cut_by["length"] > 0
    rows = spec_rows(metas(items))
    steps = sum(r["spec_verify_ct"] for r in rows)
    assert sum(r["completion_tokens"] - 1 for r in rows) / steps < server_avg(rows)


def test_versions_disagree_on_a_stop_past_the_length_limit() -> None:
    """0.5.17 checks max_new_tokens before stop strings; 0.5.23 lets a stop inside the
    limit win (`_cap_finished_len_at_max_new_tokens`). Same tokens, different finish."""
    reasons = {}
    for version in ("0.5.17", "0.5.23"):
        try:
            sglang = SGLang(version, 16, 1)
        except Exception as missing:
            pytest.skip(str(missing))
        scheduler = Scheduler(sglang, overlap=False)
        words = ["a", "b", "Question:", "c", "d", "e", "f", "g"]
        item = scheduler.add(Plan("r", words, [6, 0], max_new_tokens=5, stop=("Question",)))
        while not scheduler.idle:
            scheduler.iterate()
        reasons[version] = (item.result["finish_reason"], item.result["completion_tokens"])
    assert reasons["0.5.17"] == ({"type": "length", "length": 5}, 5)
    assert reasons["0.5.23"] == ({"type": "stop", "matched": "Question"}, 3)


def test_harness_figures_equal_sglang(make_sglang: Callable[..., SGLang]) -> None:
    """harness.metrics.definitions.accept_lengths over the SGLang adapter's parsed responses
    (as the dicts of fields a RequestRow is made of)."""
    from harness.engines.sglang import api
    from harness.metrics import definitions

    sglang = make_sglang(decode_log_interval=1)
    items = Scheduler(sglang, overlap=False).run(gsm8k_like())
    rows = [dataclasses.asdict(api.parse_generate(
        {"text": item.result["text"], "meta_info": item.result}, f"request {item.plan.rid}"))
        for item in items]
    figures = definitions.accept_lengths(rows)
    assert figures["server_avg"] == pytest.approx(sglang.server_average(), rel=1e-12)
    # SGLang's own per-request figures, pooled: a request with 0 verify steps has none
    prefill_only = [item.result for item in items if item.req.spec_verify_ct == 0]
    assert len(prefill_only) == 4 and all(
        not any(key.startswith("spec_") for key in meta) for meta in prefill_only)
    with_spec = spec_rows(metas(items))
    pooled = (sum(r["spec_accept_length"] * r["spec_verify_ct"] for r in with_spec)
              / sum(r["spec_verify_ct"] for r in with_spec))
    assert figures["per_request"] == pytest.approx(pooled, rel=1e-12)


@pytest.mark.parametrize(("version", "uno"), [("0.5.17", None), ("0.5.20", 2), ("0.5.23", 2)])
def test_non_draft_tokens_per_step_is_each_releases_own(version: str, uno: int | None) -> None:
    """SGLang's num_non_draft_tokens_per_req, read from each release's code, is what the
    harness's table says: 1 for DFLASH everywhere, 2 for UNO from 0.5.20 (issue 19, 10)."""
    from harness.engines.sglang import api

    from .extract import OracleError, OracleUnavailable
    from .sglang_code import non_draft_tokens_per_req

    try:
        assert non_draft_tokens_per_req(version, "DFLASH") == 1
    except OracleUnavailable as missing:
        pytest.skip(str(missing))
    assert api.non_draft_tokens_per_step("DFLASH", version) == 1
    if uno is None:
        with pytest.raises(OracleError, match="no UNO worker"):
            non_draft_tokens_per_req(version, "UNO")
        assert api.non_draft_tokens_per_step("UNO", version) == 1
        return
    assert non_draft_tokens_per_req(version, "UNO") == uno
    assert api.non_draft_tokens_per_step("UNO", version) == uno
    info = {"version": version, "speculative_algorithm": "UNO"}
    assert api.server_non_draft_tokens(info, "DFLASH") == uno  # the server's word wins


@pytest.mark.parametrize("version", ["0.5.20", "0.5.23"])
def test_harness_server_avg_equals_sglang_under_uno(version: str) -> None:
    """UNO's server figure is (Σcorrect + 2 Σverify) / Σverify: the harness's rows carry the
    server's constant, and its figure equals SGLang's, 1.0 above the bonus-only one."""
    from harness.engines.sglang import api
    from harness.metrics import definitions

    from .extract import OracleUnavailable

    try:
        sglang = SGLang(version, 16, 1, algorithm="UNO")
    except OracleUnavailable as missing:
        pytest.skip(str(missing))
    items = Scheduler(sglang, overlap=False).run(gsm8k_like())
    per_step = api.server_non_draft_tokens({"version": version,
                                            "speculative_algorithm": "UNO"}, "UNO")
    rows = [dict(dataclasses.asdict(api.parse_generate(
        {"text": item.result["text"], "meta_info": item.result}, f"request {item.plan.rid}")),
        non_draft_tokens_per_step=per_step) for item in items]
    figures = definitions.accept_lengths(rows)
    assert figures["server_avg"] == pytest.approx(sglang.server_average(), rel=1e-12)
    bonus_only = definitions.accept_lengths([dict(r, non_draft_tokens_per_step=1)
                                             for r in rows])
    assert figures["server_avg"] - bonus_only["server_avg"] == pytest.approx(1.0, rel=1e-12)
    with_spec = spec_rows(metas(items))
    pooled = (sum(r["spec_accept_length"] * r["spec_verify_ct"] for r in with_spec)
              / sum(r["spec_verify_ct"] for r in with_spec))
    assert figures["per_request"] == pytest.approx(pooled, rel=1e-12)
