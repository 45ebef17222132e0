"""Issue 51: nights that asked the same questions are compared by question.

Histories are run records with per-question rows written by the project's writer
(`tests.results.records.make_night`); `harness trend` reads them as it reads a nightly
job's. The A/A rate is measured on simulated nights of an engine that is not
bit-reproducible (`harness.analysis.simulate.simulate_nights`).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from harness.analysis.simulate import simulate_nights
from harness.analysis.trend import TrendParams, detect_by_question, open_drop
from harness.analysis.trend_questions import BY_CI, BY_QUESTION
from harness.cli import main
from harness.metrics.night_noise import night_noise
from tests.results.records import make_night

START = datetime(2026, 11, 1, 2, 0, tzinfo=UTC)
DEFAULT = "reference"
NOISY = "reference:noise=0.03"
QUESTIONS = 100


def answers(level: float, seed: int, questions: int = QUESTIONS) -> tuple[list[int], list[int]]:
    """One build's answers to the prompt set: per-question numerators over verify steps
    whose ratio of sums is `level` to four decimals (3.8465, 3.6870: the issue's builds)."""
    rng = np.random.default_rng(seed)
    steps = rng.integers(80, 121, questions)
    share = rng.gamma(8.0, 1 / 8.0, questions)
    extra = np.floor(share / (share @ steps) * (level - 1) * steps.sum() * steps)
    extra[0] += round((level - 1) * steps.sum()) - extra.sum()
    return [int(v) for v in steps + extra], [int(v) for v in steps]


def seven_nights(results: Path, **night: object) -> list[Path]:
    """The issue's history: 4 nights of the default build at 3.8465, 3 of
    `--build reference:noise=0.03` at 3.6870, each build answering identically."""
    default, steps = answers(3.8465, 1)
    noisy, same_steps = answers(3.6870, 1)  # the same questions: the same steps drawn
    assert same_steps == steps
    nights = [(DEFAULT, default)] * 4 + [(NOISY, noisy)] * 3
    return [make_night(results, tokens, steps, START + timedelta(days=i), spec=spec,
                       **night)  # type: ignore[arg-type]
            for i, (spec, tokens) in enumerate(nights)]


def trend_json(results: Path, capsys: pytest.CaptureFixture[str], *extra: str
               ) -> tuple[int, dict]:
    code = main(["trend", "tiny_dflash_cpu", "--results", str(results), "--json", *extra])
    [summary] = json.loads(capsys.readouterr().out)
    return code, summary


def test_the_step_between_builds_is_found_by_question_at_the_new_builds_first_night(
        results: Path, capsys: pytest.CaptureFixture[str]) -> None:
    seven_nights(results)
    code, summary = trend_json(results, capsys)
    assert code == 1 and summary["alarm"], summary
    assert summary["judged_by"] == BY_QUESTION
    assert "7 nights on the same 100 questions" in summary["comparison"]
    [step] = summary["steps"]
    assert step["index"] == 4  # the first night of reference:noise=0.03
    assert step["at"].startswith((START + timedelta(days=4)).date().isoformat())
    assert step["before"] == pytest.approx(3.8465, abs=1e-4)
    assert step["after"] == pytest.approx(3.6870, abs=1e-4)
    assert summary["trend"].startswith("drop -0.16 since") and BY_QUESTION in summary["trend"]

    # today's detector, asked for, is blind to it: each night's CI is +-0.3
    code, summary = trend_json(results, capsys, "--by-ci")
    assert code == 0 and not summary["alarm"] and summary["judged_by"] == BY_CI


def test_the_table_and_markdown_say_which_comparison_judged(
        results: Path, capsys: pytest.CaptureFixture[str]) -> None:
    seven_nights(results)
    assert main(["trend", "--results", str(results), "--markdown"]) == 1
    text = capsys.readouterr().out
    assert f"drop -0.16 since {(START + timedelta(days=4)).date()}" in text
    assert BY_QUESTION in text


def test_a_change_of_data_in_the_middle_is_named_and_judged_by_ci(
        results: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tokens, steps = answers(3.8465, 1)
    for i in range(6):
        make_night(results, tokens, steps, START + timedelta(days=i),
                   data_sha256=("a" if i < 3 else "b") * 64)
    code, summary = trend_json(results, capsys)
    assert code == 0 and summary["judged_by"] == BY_CI
    [note] = summary["notes"]
    assert "between night 2026-11-03" in note and "night 2026-11-04" in note
    assert "data_sha256 differs" in note


def test_a_night_with_a_question_missing_is_named_and_the_rest_compared(
        results: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tokens, steps = answers(3.8465, 1)
    for i in range(6):
        keep = [q for q in range(QUESTIONS) if not (i == 2 and q == 17)]
        make_night(results, [tokens[q] for q in keep], [steps[q] for q in keep],
                   START + timedelta(days=i), questions=keep)
    code, summary = trend_json(results, capsys)
    assert summary["judged_by"] == BY_QUESTION and code == 0
    assert "99 questions" in summary["comparison"]
    missing = [note for note in summary["notes"] if "lacks" in note]
    assert len(missing) == 1 and "2026-11-03" in missing[0] and "(17)" in missing[0]


def test_one_builds_repeats_are_named(results: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    rng = np.random.default_rng(3)
    tokens, steps = simulate_nights(rng, nights=5, questions=QUESTIONS)
    for i in range(5):
        make_night(results, list(tokens[i]), list(steps[i]), START + timedelta(days=i))
    code, summary = trend_json(results, capsys)
    assert code == 0 and summary["judged_by"] == BY_QUESTION
    assert any("one build only (reference): 5 repeats" in note for note in summary["notes"])


def test_a_night_without_request_rows_falls_back_and_says_so(
        results: Path, capsys: pytest.CaptureFixture[str]) -> None:
    paths = seven_nights(results)
    (paths[2] / "requests.jsonl").unlink()
    _, summary = trend_json(results, capsys)
    assert summary["judged_by"] == BY_CI
    assert any("2026-11-03" in note and "request rows" in note for note in summary["notes"])


def test_false_alarms_on_a_nondeterministic_engine_stay_under_one_percent() -> None:
    """A/A: 400 histories of 6 nights, engine sd 0.35 per question and night, host sd
    0.03 a night (benchmarks/bench_trend_by_question.py runs 2,000 a case)."""
    alarms = 0
    for seed in range(400):
        tokens, steps = simulate_nights(seed, nights=6, host_sd=0.03)
        steps_found, _ = detect_by_question(night_noise(tokens, steps))
        alarms += open_drop(steps_found, TrendParams().min_shift) is not None
    assert alarms <= 4


def test_a_planted_drop_on_a_nondeterministic_engine_is_found_where_planted() -> None:
    found = 0
    for seed in range(50):
        tokens, steps = simulate_nights(seed, nights=6, drop=0.3, at=3)
        step = open_drop(detect_by_question(night_noise(tokens, steps))[0], 0.1)
        found += step is not None and step.index == 3
    assert found >= 45
