"""`--sequential` with categories and accuracy: stratified waves, and a rule that settles
every floor the verdict uses (issue 19, cases 1 and 2)."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from harness.results.record import RequestRow
from harness.run.judge import judge
from harness.run.sequential import stop_rule, stratified_order
from harness.suite.model import load_suite
from harness.workloads.items import Prompt

SPEC_BENCH = {"mt_bench": 80, "translation": 80, "summarization": 80, "qa": 80,
              "math_reasoning": 80, "rag": 80}


def _prompts(counts: dict[str, int]) -> list[Prompt]:
    prompts, index = [], 0
    for category, n in counts.items():  # file order: one category after another
        for _ in range(n):
            prompts.append(Prompt(question_index=index, text=f"q{index}", label=None,
                                  category=category))
            index += 1
    return prompts


def test_every_wave_is_a_stratified_seeded_sample_of_the_categories() -> None:
    prompts = _prompts(SPEC_BENCH)
    order = stratified_order(prompts, seed=0)
    assert sorted(p.question_index for p in order) == list(range(480))
    for look in (50, 100, 150):
        counts = Counter(p.category for p in order[:look])
        assert set(counts) == set(SPEC_BENCH)  # file order: 50 x mt_bench
        assert max(counts.values()) - min(counts.values()) <= 1
    assert [p.question_index for p in stratified_order(prompts, 0)] == \
        [p.question_index for p in order]  # seeded: the same for every build
    assert [p.question_index for p in stratified_order(prompts, 1)] != \
        [p.question_index for p in order]
    uneven = stratified_order(_prompts({"a": 30, "b": 10}), seed=3)
    assert Counter(p.category for p in uneven[:20]) == {"a": 15, "b": 5}
    gsm8k = _prompts({"gsm8k": 40})
    assert stratified_order(gsm8k, seed=0) == gsm8k  # one category: the data's order


def _rows(n: int, accuracy: float, seed: int, accept: float = 5.0) -> list[RequestRow]:
    draws = random.Random(seed)
    rows = []
    for q in range(n):
        steps = draws.randint(20, 60)
        drafts = max(0, round(draws.gauss((accept - 1) * steps, 0.6 * steps)))
        rows.append(RequestRow(index=q, question_index=q, completion_tokens=1 + drafts + steps,
                               verify_steps=steps, correct_drafts=drafts,
                               spec_accept_length=(1 + drafts + steps) / steps, latency_s=1.0,
                               correct=draws.random() < accuracy, category="gsm8k"))
    return rows


def _sequential_verdict(suite, rows: list[RequestRow]) -> tuple[str, int]:
    """What `--sequential` does: look after each wave, stop when settled, then judge the
    requests sent (as the runner does, with the accept-length decision)."""
    rule = stop_rule(suite, len(rows))
    for look in rule.looks(len(rows)):
        if rule.decide_rows(rows[:look]) is not None:
            break
    from harness.metrics.measure import summarise

    measurement = summarise(rows[:look], suite.floors.metric, 1.0, None)
    return judge(measurement, suite.floors,
                 sequential=rule.decisions.get("accept length")).status, look


def _gate_suite():
    """qwen3_8b_dflash under SGLang's DFlash gate's floors: accept length > 2.8, score
    >= 0.75 (the shape of test_dflash.py's; the shipped suite's own floors are Qwen3-8B's)."""
    from harness.suite.model import Floors

    suite = load_suite("qwen3_8b_dflash").suite
    return suite.model_copy(update={"floors": Floors(accept_length=2.8, accuracy=0.75,
                                                     strict=True)})


def test_accuracy_must_settle_before_the_rule_stops() -> None:
    """SGLang's gate: accept length far above 2.8, true accuracy 0.80 against 0.75. The
    landed rule settled "pass" at 50 on accept length alone and judged accuracy on those
    50: P(fail) 0.18 against the fixed protocol's 0.043."""
    suite = _gate_suite()
    rows = _rows(200, 0.80, seed=0)
    rule = stop_rule(suite, 200)
    assert rule.decide_rows(rows[:50]) is None  # accept length settled, accuracy not
    assert rule.decisions["accept length"] == "pass" and rule.decisions["accuracy"] is None
    assert rule.tested_floors() == ["accept length", "accuracy"]
    replays = [_sequential_verdict(suite, _rows(200, 0.80, seed=s)) for s in range(300)]
    p_fail = sum(status == "fail" for status, _ in replays) / len(replays)
    assert p_fail <= 0.09  # the fixed gate's 0.043, plus at most alpha-sized early fails
    assert sum(look < 200 for _, look in replays) > 0  # and it still stops early sometimes


def test_a_settled_fail_of_any_floor_stops_and_stands() -> None:
    suite = _gate_suite()
    rows = _rows(200, 0.40, seed=1)  # accuracy far below 0.75
    rule = stop_rule(suite, 200)
    assert rule.decide_rows(rows[:50]) == "fail"
    assert rule.decisions["accuracy"] == "fail"
    status, look = _sequential_verdict(suite, rows)
    assert (status, look) == ("fail", 50)


@pytest.mark.parametrize("floors", [
    {"categories": {"translation": {"accept_length": 1.5}}},
    {"positions": [0.5, 0.3]},
])
def test_category_and_position_floors_are_settled_too(floors: dict[str, object]) -> None:
    from harness.suite.model import Floors

    suite = load_suite("qwen3_8b_dflash").suite
    suite = suite.model_copy(update={"floors": Floors(accept_length=2.8, strict=True,
                                                      **floors)})
    rule = stop_rule(suite, 200)
    names = rule.tested_floors()
    assert names[0] == "accept length" and len(names) == 1 + (
        1 if "categories" in floors else 2)
    rows = _rows(200, 0.9, seed=2)
    for row in rows:  # half the questions are translation, every step accepts 3 drafts
        row.category = "translation" if row.question_index % 2 else "qa"
        row.accept_histogram = [0, 0, 0, row.verify_steps]
    assert rule.decide_rows(rows[:50]) == "pass"
    assert set(rule.decisions) == set(names) and set(rule.decisions.values()) == {"pass"}


def test_power_states_the_error_rates_per_floor(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from harness.cli import main

    assert main(["power", "gemma4_dflash_31b", "--json"]) == 0  # >= 5.4 and >= 0.75
    floors = json.loads(capsys.readouterr().out)["sequential_floors"]
    assert [row["floor"] for row in floors["floors"]] == ["accept length", "accuracy"]
    assert floors["floors"][1] == {"floor": "accuracy", "p_early_fail_if_met": 0.05,
                                   "p_early_pass_if_missed": 0.2}
    assert floors["p_early_fail_if_all_met"] == pytest.approx(0.1)
    assert main(["power", "tiny_spec_bench_cpu", "--json"]) == 0
    names = [row["floor"] for row in
             json.loads(capsys.readouterr().out)["sequential_floors"]["floors"]]
    assert "position 3" in names and "category summarization accept length" in names
    assert main(["power", "tiny_spec_bench_cpu"]) == 0
    assert "floors x alpha" in " ".join(capsys.readouterr().out.split())
