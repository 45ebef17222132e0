"""The floors as data: every kind of floor becomes one typed check with its key, figure,
floor, strictness, definition and sequential statistic; `met` is the one comparison."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.metrics.floor_checks import (
    ACCURACY,
    POSITION_ACCEPTANCE,
    Figure,
    FloorCheck,
    GradedSample,
    Missing,
    RatioSample,
    floor_checks,
    meets,
    recorded_floor_checks,
)
from harness.results.record import CategoryResult, Measurement, RequestRow
from harness.suite.model import Floors

EVERY_KIND = Floors(
    accept_length=2.8, metric="per_request", strict=True, accuracy=0.75,
    categories={"qa": {"accept_length": 2.0, "accuracy": 0.5, "strict": True},
                "rag": {"accuracy": 0.6}},
    positions=[0.6, 0.4], positions_strict=True)


def test_every_kind_of_floor_is_one_check_in_the_verdicts_order() -> None:
    checks = floor_checks(EVERY_KIND)
    assert [(c.key, c.kind, c.floor, c.strict, c.definition, c.statistic) for c in checks] == [
        ("accept length", "accept_length", 2.8, True, "per_request", "ratio"),
        ("accuracy", "accuracy", 0.75, False, ACCURACY, "score"),
        ("category qa accept length", "category_accept_length", 2.0, True, "per_request",
         "ratio"),
        ("category qa accuracy", "category_accuracy", 0.5, True, ACCURACY, "score"),
        ("category rag accuracy", "category_accuracy", 0.6, False, ACCURACY, "score"),
        ("position 1", "position", 0.6, True, POSITION_ACCEPTANCE, "ratio"),
        ("position 2", "position", 0.4, True, POSITION_ACCEPTANCE, "ratio"),
    ]
    assert [c.category for c in checks] == [None, None, "qa", "qa", "rag", None, None]
    assert [c.position for c in checks] == [None] * 5 + [1, 2]
    assert [c.overall for c in checks] == [True, True] + [False] * 5


def test_only_the_accept_length_floor_when_nothing_else_is_set() -> None:
    assert [c.key for c in floor_checks(Floors(accept_length=1.5))] == ["accept length"]


@pytest.mark.parametrize(("value", "strict", "met"), [
    (2.8, False, True), (2.8, True, False), (math.nextafter(2.8, 9), True, True),
    (math.nextafter(2.8, 0), False, False), (27 / 5, False, True),
])
def test_met_is_strict_or_not_exactly_at_the_floor(value: float, strict: bool,
                                                   met: bool) -> None:
    floor = 27 / 5 if value == 27 / 5 else 2.8
    check = FloorCheck("accept length", "accept_length", floor, strict, "server_avg")
    assert check.met(value) is met is meets(value, floor, strict)
    assert check.relation == (">" if strict else ">=")


@given(value=st.floats(allow_nan=False), floor=st.floats(allow_nan=False), strict=st.booleans())
def test_met_agrees_with_its_relation(value: float, floor: float, strict: bool) -> None:
    assert meets(value, floor, strict) == (value > floor or (not strict and value == floor))


def _measurement(**extra: object) -> Measurement:
    fields: dict[str, object] = {"accuracy": 0.8, **extra}
    return Measurement(metric="per_request", accept_length=3.0, accept_length_ci=(2.9, 3.1),
                       n_requests=40, n_planned=40, **fields)


def test_readings_of_every_kind() -> None:
    measurement = _measurement(
        categories={"qa": CategoryResult(n_prompts=20, n_requests=20, accept_length=2.5,
                                         accept_length_ci=(2.4, 2.6), accuracy=0.55),
                    "rag": CategoryResult(n_prompts=20, n_requests=20, accept_length=3.5,
                                          accuracy=0.7)},
        accept_histogram=[5, 5, 10], per_position_acceptance=[0.75, 0.5],
        per_position_ci=[(0.7, 0.8), (0.45, 0.55)])
    readings = {c.key: c.reading(measurement) for c in floor_checks(EVERY_KIND)}
    assert readings == {
        "accept length": Figure(3.0, "accept length (per_request) 3.0000 (95% CI 2.900-3.100)"),
        "accuracy": Figure(0.8, "accuracy 0.800"),
        "category qa accept length": Figure(
            2.5, "category qa accept length 2.5000 (95% CI 2.400-2.600), 20 prompts"),
        "category qa accuracy": Figure(0.55, "category qa accuracy 0.550"),
        "category rag accuracy": Figure(0.7, "category rag accuracy 0.700"),
        "position 1": Figure(0.75, "P(position 1 accepted) 0.750 (95% CI 0.700-0.800)"),
        "position 2": Figure(0.5, "P(position 2 accepted) 0.500 (95% CI 0.450-0.550)"),
    }


def test_a_missing_figure_is_missing_never_a_value() -> None:
    measurement = _measurement(accuracy=None, categories={
        "qa": CategoryResult(n_prompts=3, n_requests=3, accept_length=None, accuracy=None)})
    readings = {c.key: c.reading(measurement) for c in floor_checks(EVERY_KIND)}
    assert readings["accuracy"] == Missing("accuracy floor set but no accuracy measured")
    assert readings["category qa accept length"] == Missing(
        "category 'qa': no accept length (no verify step)")
    assert readings["category qa accuracy"] == Missing(
        "category 'qa' has an accuracy floor but is not graded")
    assert readings["category rag accuracy"] == Missing(
        "category 'rag' has a floor but no measured request (measured: qa)")
    assert isinstance(readings["position 1"], Missing)
    assert "histogram" in readings["position 2"].reason  # type: ignore[union-attr]


def test_a_position_no_verify_step_reached_reads_zero() -> None:
    """SGLang sizes a histogram by the largest accepted count: a draft that never reaches
    position 2 reports one position; its floor is judged at rate 0 (a broken draft fails)."""
    check = floor_checks(Floors(accept_length=1.0, positions=[0.5, 0.1]))[2]
    found = check.reading(_measurement(accept_histogram=[5, 5], per_position_acceptance=[0.5]))
    assert found == Figure(0.0, "P(position 2 accepted) 0.000 (no verify step reached "
                                "position 2)")
    assert not check.met(found.value)


def _row(q: int, category: str, tokens: int, steps: int, correct: bool | None,
         histogram: list[int] | None = None) -> RequestRow:
    return RequestRow(index=q, question_index=q, completion_tokens=tokens, verify_steps=steps,
                      spec_accept_length=tokens / steps, latency_s=1.0, correct=correct,
                      category=category, accept_histogram=histogram)


def test_samples_for_the_sequential_statistic() -> None:
    rows = [_row(0, "qa", 30, 10, True, [2, 3, 5]), _row(1, "rag", 20, 10, None, [10]),
            _row(2, "qa", 25, 10, False, [4, 6])]
    samples = {c.key: c.sample(rows) for c in floor_checks(EVERY_KIND)}
    assert samples["accept length"] == RatioSample([30, 20, 25], [10, 10, 10])
    assert samples["accuracy"] == GradedSample([True, False])  # the ungraded row left out
    assert samples["category qa accept length"] == RatioSample([30, 25], [10, 10])
    assert samples["category qa accuracy"] == GradedSample([True, False])
    assert samples["category rag accuracy"] == GradedSample([])
    # per question with a histogram: steps accepting >= k drafts over all its steps
    assert samples["position 1"] == RatioSample([8, 0, 6], [10, 10, 10])
    assert samples["position 2"] == RatioSample([5, 0, 0], [10, 10, 10])


def test_a_records_document_declares_its_checks() -> None:
    document = {"floors": {"accept_length": 2, "categories": {"qa": {"accept_length": 1.5,
                                                                     "strict": True}},
                           "positions": [0.5]}}
    checks = recorded_floor_checks(document, "per_request")
    assert [(c.key, c.floor, c.strict, c.definition) for c in checks] == [
        ("accept length", 2.0, False, "per_request"),
        ("category qa accept length", 1.5, True, "per_request"),
        ("position 1", 0.5, False, POSITION_ACCEPTANCE)]
    own = recorded_floor_checks({"floors": {"accept_length": 2, "metric": "server_avg"}},
                                "per_request")
    assert own[0].definition == "server_avg"  # the document's own definition stands


@pytest.mark.parametrize("document", [
    {}, {"floors": None}, {"floors": []}, {"floors": {"accept_length": "2"}},
    {"floors": {"accept_length": 0.5}}, {"floors": {"accept_length": 2, "strict": "yes"}},
    {"floors": {"accept_length": 2, "positions": [1.5]}},
])
def test_floors_that_do_not_validate_declare_nothing(document: dict[str, object]) -> None:
    assert recorded_floor_checks(document, "server_avg") == []
