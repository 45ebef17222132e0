"""Per-category and per-position figures: CIs over questions, B - A with significance,
and the floors a suite may put on them."""

from __future__ import annotations

import random

import pytest

from harness.metrics import breakdown, stats
from harness.metrics.measure import summarise
from harness.results.record import Measurement, RequestRow
from harness.run.judge import judge
from harness.suite.model import Floors


def _histogram(steps: int, accepted: list[int]) -> list[int]:
    counts = [0] * (max(accepted) + 1)
    for a in accepted:
        counts[a] += 1
    return counts


def _rows(n: int, seed: int, rates: list[float], category: str = "qa",
          collapse_from: int | None = None, start: int = 0) -> list[RequestRow]:
    """Requests of `n` questions: per verify step, position k is accepted with
    probability rates[k-1] given k-1 was; `collapse_from`: positions from there on are
    never accepted (the same draws otherwise, so the sides pair exactly)."""
    rng = random.Random(seed)
    rows = []
    for q in range(n):
        steps = rng.randint(8, 20)
        accepted = []
        for _ in range(steps):
            a = 0
            while a < len(rates) and rng.random() < rates[a]:
                a += 1
            if collapse_from is not None:
                a = min(a, collapse_from - 1)
            accepted.append(a)
        drafts = sum(accepted)
        rows.append(RequestRow(
            index=start + q, question_index=start + q, category=category,
            completion_tokens=1 + drafts + steps, verify_steps=steps, correct_drafts=drafts,
            spec_accept_length=(1 + drafts + steps) / steps,
            accept_histogram=_histogram(steps, accepted), latency_s=1.0,
            correct=q % 3 != 0))
    return rows


RATES = [0.9, 0.8, 0.7, 0.6]


def test_per_position_rates_and_cis() -> None:
    rows = _rows(60, 1, RATES)
    rates, cis = breakdown.per_position(rows)
    summed = stats.sum_histograms([r.accept_histogram for r in rows])
    assert rates == pytest.approx(stats.per_position_acceptance(summed))
    assert cis is not None and len(cis) == len(rates) == 4
    for rate, (low, high) in zip(rates, cis, strict=True):
        assert low < rate < high and high - low < 0.2
    # more questions, narrower intervals; one question, no interval
    wide = breakdown.per_position(rows[:10])[1]
    assert all(w[1] - w[0] > c[1] - c[0] for w, c in zip(wide, cis, strict=True))
    assert breakdown.per_position(rows[:1])[1] is None
    assert breakdown.per_position([r.model_copy(update={"accept_histogram": None})
                                   for r in rows]) == ([], None)


def test_turns_of_a_question_are_one_unit() -> None:
    rows = _rows(6, 2, RATES)
    split = []
    for row in rows:  # the same question's figures in two turns
        half = row.verify_steps // 2
        split.append(row.model_copy(update={"verify_steps": half, "turn": 0}))
        split.append(row.model_copy(update={"verify_steps": row.verify_steps - half,
                                            "turn": 1}))
    keys, tokens, steps = breakdown.question_pairs(split, "per_request")
    assert keys == [r.question_index for r in rows]
    assert tokens == [2 * r.completion_tokens for r in rows]
    assert steps == [r.verify_steps for r in rows]


def test_summarise_keeps_categories_and_position_cis() -> None:
    rows = _rows(30, 3, RATES, "qa") + _rows(30, 4, RATES, "translation", start=30)
    measurement = summarise(rows, "server_avg", 10.0, None)
    assert set(measurement.categories) == {"qa", "translation"}
    qa = measurement.categories["qa"]
    assert qa.n_prompts == qa.n_requests == 30
    assert qa.accept_length == pytest.approx(
        stats.accept_length(*breakdown.question_pairs(rows[:30], "server_avg")[1:]))
    assert qa.accept_length_ci[0] < qa.accept_length < qa.accept_length_ci[1]
    assert qa.accuracy == pytest.approx(20 / 30)
    assert len(qa.per_position_ci) == 4
    assert measurement.n_prompts == 60
    assert len(measurement.per_position_ci) == len(measurement.per_position_acceptance)


def test_compare_shows_where_builds_differ() -> None:
    a = _rows(50, 5, RATES, "qa") + _rows(50, 6, RATES, "translation", start=50)
    # B: the same draws, but in translation nothing past position 2 is ever accepted
    b = _rows(50, 5, RATES, "qa") + _rows(50, 6, RATES, "translation", collapse_from=3,
                                          start=50)
    categories = breakdown.compare_categories(a, b, "per_request")
    assert categories["qa"]["b_minus_a"] == 0.0 and categories["qa"]["p_value"] == 1.0
    drop = categories["translation"]
    assert drop["b_minus_a"] < -0.3 and drop["p_value"] < 1e-6 and drop["p_drop"] < 1e-6
    assert drop["method"].startswith("paired")
    positions = breakdown.compare_positions(a, b)
    assert [p["position"] for p in positions] == [1, 2, 3, 4]
    assert positions[0]["p_value"] == 1.0 and positions[1]["p_value"] == 1.0
    assert positions[2]["b_minus_a"] < -0.1 and positions[2]["p_value"] < 1e-6
    assert positions[3]["b_minus_a"] < 0 and positions[3]["p_value"] < 1e-6
    # different questions on the two sides: independent samples
    other = breakdown.compare_categories(a[:50], _rows(40, 9, RATES, "qa", start=200),
                                         "per_request")
    assert other["qa"]["method"].startswith("independent")


def _measured(rows: list[RequestRow]) -> Measurement:
    return summarise(rows, "server_avg", 1.0, None)


def test_category_and_position_floors() -> None:
    rows = _rows(30, 3, RATES, "qa") + _rows(30, 4, RATES, "translation", collapse_from=2,
                                               start=30)
    measurement = _measured(rows)
    translation = measurement.categories["translation"].accept_length
    qa = measurement.categories["qa"].accept_length
    floors = Floors(accept_length=1.0, categories={
        "qa": {"accept_length": qa - 0.1, "accuracy": 0.5},
        "translation": {"accept_length": translation + 0.1}})
    verdict = judge(measurement, floors)
    assert verdict.status == "fail"
    assert any(r.startswith("category translation accept length") and "below its floor" in r
               for r in verdict.reasons)
    assert any(r.startswith("category qa accept length") and ">= floor" in r
               for r in verdict.reasons)
    assert any(r.startswith("category qa accuracy 0.667 >= floor 0.5") for r in verdict.reasons)
    rates = measurement.per_position_acceptance
    passing = Floors(accept_length=1.0, positions=[rates[0] - 0.01, rates[1] - 0.01])
    assert judge(measurement, passing).status == "pass"
    failing = Floors(accept_length=1.0, positions=[rates[0] + 0.01])
    verdict = judge(measurement, failing)
    assert verdict.status == "fail" and "P(position 1 accepted)" in verdict.reasons[-2]
    strict = Floors(accept_length=1.0, positions_strict=True, positions=[rates[0]])
    assert judge(measurement, strict).status == "fail"  # needs > with strict position floors
    # the accept-length floor's strictness is its own: positions stay >=
    assert judge(measurement, Floors(accept_length=1.0, strict=True,
                                     positions=[rates[0]])).status == "pass"
    at_qa = Floors(accept_length=1.0, categories={"qa": {"accept_length": qa}})
    assert judge(measurement, at_qa).status == "pass"
    strict_qa = Floors(accept_length=1.0, categories={"qa": {"accept_length": qa,
                                                              "strict": True}})
    verdict = judge(measurement, strict_qa)
    assert verdict.status == "fail" and any("needs > " in r for r in verdict.reasons)


def test_a_floor_on_what_was_not_measured_is_an_error() -> None:
    measurement = _measured(_rows(10, 3, RATES, "qa"))
    verdict = judge(measurement, Floors(accept_length=1.0,
                                        categories={"rag": {"accept_length": 1.0}}))
    assert verdict.status == "error"
    assert verdict.reasons[0].startswith("category 'rag' has a floor but no measured request")
    no_histogram = _measured([r.model_copy(update={"accept_histogram": None})
                              for r in _rows(10, 3, RATES, "qa")])
    verdict = judge(no_histogram, Floors(accept_length=1.0, positions=[0.1]))
    assert verdict.status == "error" and "no request carries" in verdict.reasons[0]
    graded_not = _measured([r.model_copy(update={"correct": None})
                            for r in _rows(10, 3, RATES, "qa")])
    verdict = judge(graded_not, Floors(accept_length=1.0, categories={"qa": {"accuracy": 0.1}}))
    assert verdict.status == "error" and "is not graded" in verdict.reasons[0]


def test_positions_a_draft_never_reached_have_rate_0_and_fail() -> None:
    """SGLang sizes each histogram by the largest accepted count: positions past it were
    never accepted. A broken draft (nothing ever accepted) fails its position floors, exit
    1, instead of being an engine error (issue 19, case 3)."""
    measurement = _measured(_rows(10, 3, RATES, "qa"))
    assert len(measurement.per_position_acceptance) == 4
    verdict = judge(measurement, Floors(accept_length=1.0, positions=[0.1] * 6))
    assert verdict.status == "fail"
    assert any(r.startswith("P(position 5 accepted) 0.000 (no verify step reached position 5)")
               and "below its floor" in r for r in verdict.reasons)
    broken = _measured(_rows(10, 3, [0.0], "qa"))  # noise = 1.0: histogram [steps]
    assert broken.accept_length == 1.0 and not broken.per_position_acceptance
    verdict = judge(broken, Floors(accept_length=2.0, positions=[0.5, 0.3]))
    assert verdict.status == "fail"
    assert "is below the floor" in verdict.reasons[0]
    assert sum("P(position" in r and "below its floor" in r for r in verdict.reasons) == 2
    # a floor of 0 at a never-reached position holds (0 >= 0)
    assert judge(broken, Floors(accept_length=1.0, positions=[0.0])).status == "pass"
