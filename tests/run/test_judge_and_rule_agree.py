"""The judge and the sequential rule iterate one list of floors (`floor_checks`): whatever
the floors, the floors the rule settles at an early look are exactly the floors the judge
checks, so neither can gain a floor the other lacks."""

from __future__ import annotations

import random
from types import SimpleNamespace

from hypothesis import given, settings
from hypothesis import strategies as st

from harness.metrics.floor_checks import floor_checks
from harness.metrics.measure import summarise
from harness.results.record import RequestRow
from harness.run.judge import judge
from harness.run.sequential import rule_settings, stop_rule
from harness.suite.model import Floors

CATEGORIES = ("qa", "rag", "math")
QUESTIONS = 60
LOOK = 50  # the rule's first look (its wave) of a 200-question plan
SETTLES = "the sequential rule settles above"


def _rows(seed: int) -> list[RequestRow]:
    """Questions of every category, graded, each with an accepted-draft histogram."""
    draws = random.Random(seed)
    rows = []
    for q in range(QUESTIONS):
        steps = draws.randint(20, 40)
        histogram = [draws.randint(0, 3) for _ in range(3)]
        histogram.append(steps - sum(histogram))
        drafts = sum(k * count for k, count in enumerate(histogram))
        rows.append(RequestRow(
            index=q, question_index=q, completion_tokens=1 + drafts + steps,
            verify_steps=steps, correct_drafts=drafts, spec_accept_length=(1 + drafts + steps)
            / steps, latency_s=1.0, correct=draws.random() < 0.7,
            category=CATEGORIES[q % len(CATEGORIES)], accept_histogram=histogram))
    return rows


unit = st.floats(0.05, 0.95)
category_floors = st.fixed_dictionaries({}, optional={
    "accept_length": st.floats(1.0, 6.0), "accuracy": unit, "strict": st.booleans()}).filter(
    lambda floor: "accept_length" in floor or "accuracy" in floor)
floors_strategy = st.builds(
    Floors,
    accept_length=st.floats(1.0, 6.0),
    metric=st.sampled_from(["server_avg", "per_request"]),
    accuracy=st.none() | unit,
    strict=st.booleans(), accuracy_strict=st.booleans(), positions_strict=st.booleans(),
    categories=st.dictionaries(st.sampled_from(CATEGORIES), category_floors, max_size=3),
    positions=st.lists(unit, max_size=4),
)


@settings(max_examples=60, deadline=None)
@given(floors=floors_strategy, seed=st.integers(0, 10))
def test_any_floors_the_rule_settles_exactly_what_the_judge_checks(floors: Floors,
                                                                    seed: int) -> None:
    rows = _rows(seed)
    suite = SimpleNamespace(floors=floors)
    rule = stop_rule(suite, 200)
    rule.decide_rows(rows[:LOOK])
    keys = [check.key for check in floor_checks(floors)]
    assert list(rule.decisions) == keys  # every floor has the rule's decision, no other
    assert rule_settings(suite, 200)["settles"] == keys  # as the record states it
    # The judge, given each of those decisions as settled above, names every one of them
    # once and judges no floor on its point estimate: a floor the judge checks but the rule
    # did not settle would read "floor" without the rule's words, and a floor the rule
    # settled but the judge does not check would be missing from its reasons.
    measurement = summarise(rows[:LOOK], floors.metric, 1.0, None, planned=200)
    verdict = judge(measurement, floors, settled=dict.fromkeys(rule.decisions, "pass"))
    assert verdict.status == "pass", verdict.reasons
    judged = [reason for reason in verdict.reasons if not reason.startswith("note:")]
    assert len(judged) == len(keys)
    assert all(SETTLES in reason for reason in judged), judged


@settings(max_examples=40, deadline=None)
@given(floors=floors_strategy, seed=st.integers(0, 10))
def test_a_floor_left_open_is_never_a_pass(floors: Floors, seed: int) -> None:
    """Each floor the rule may leave open at a stop: the judge's verdict is not a pass, and
    names that floor by the rule's key."""
    rows = _rows(seed)
    measurement = summarise(rows[:LOOK], floors.metric, 1.0, None, planned=200)
    keys = [check.key for check in floor_checks(floors)]
    for key in keys:
        settled: dict[str, str | None] = dict.fromkeys(keys, "pass")
        settled[key] = None
        verdict = judge(measurement, floors, settled=settled)
        assert verdict.status == "fail"
        assert any(reason.startswith(f"not a pass: {key} still open")
                   for reason in verdict.reasons), verdict.reasons
