"""A stored record's figures are checked against the bound the suite validator uses
(`harness.speculation.bounds`), per algorithm and per definition of accept length: what a
suite may ask for, a record may hold (a UNO run's per_request figure reaches T + 1 = its
num_draft_tokens + 2), and what no verify step makes is refused in both."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import get_args

import pytest

from harness.results.checks import step_of
from harness.results.layout import REQUESTS_FILE, RUN_FILE
from harness.results.readers import BadRecord, read_requests, read_run
from harness.speculation.bounds import ALGORITHMS, DEFAULT_ALGORITHM, loosest_bound
from harness.suite.model import parse_suite
from harness.suite.serving import Speculative
from tests.results.records import make_run
from tests.suite.test_impossible_suites import BOUNDS, suite_with


def record_with(run_dir: Path, speculative: str, engine: str,
                measurement: dict[str, object], floors: str = "") -> Path:
    """`run_dir`'s record, its suite document the one `suite_with` gives (as a run keeps
    it: the TOML as written), its measurement `measurement`."""
    text = suite_with(floors, speculative, engine)
    parse_suite(text, "s.toml")  # a suite the validator takes
    data = json.loads((run_dir / RUN_FILE).read_text())
    data["suite"]["document"] = {**tomllib.loads(text), "name": data["suite"]["name"]}
    data["build"]["options"] = {}
    data["measurement"] = measurement
    (run_dir / RUN_FILE).write_text(json.dumps(data))
    return run_dir


def per_request(figure: float, steps: int = 10) -> dict[str, object]:
    """A measurement in per_request whose counts give `figure`: one verify step a request."""
    tokens = round(figure * steps)
    return {"metric": "per_request", "accept_length": tokens / steps,
            "accept_length_per_request": tokens / steps, "completion_tokens": tokens,
            "verify_steps": steps, "n_requests": steps}


def server_avg(figure: float, steps: int = 100) -> dict[str, object]:
    correct = round((figure - 1) * steps)  # k = 1; UNO's k = 2 is one more correct draft
    return {"metric": "server_avg", "accept_length": (correct + steps) / steps,
            "accept_length_server_avg": (correct + steps) / steps, "correct_drafts": correct,
            "completion_tokens": round(figure * steps), "verify_steps": steps,
            "n_requests": steps}


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    return make_run(tmp_path / "results", n=6)


@pytest.mark.parametrize(("speculative", "engine", "top"), BOUNDS)
def test_a_records_accept_length_is_bounded_as_the_suites_floor(
        run_dir: Path, speculative: str, engine: str, top: int) -> None:
    record_with(run_dir, speculative, engine, per_request(top + 1))
    assert read_run(run_dir).measurement.accept_length == top + 1  # type: ignore[union-attr]
    record_with(run_dir, speculative, engine, per_request(top + 1.1))
    with pytest.raises(BadRecord, match=r"measurement\.accept_length.*per_request"):
        read_run(run_dir)
    record_with(run_dir, speculative, engine, server_avg(top))
    assert read_run(run_dir).measurement.accept_length == top  # type: ignore[union-attr]
    record_with(run_dir, speculative, engine, server_avg(top + 0.1))
    with pytest.raises(BadRecord, match=r"measurement\.accept_length.*server_avg is at most"):
        read_run(run_dir)


@pytest.mark.parametrize(("speculative", "engine", "top"), BOUNDS)
def test_a_records_floor_is_bounded_as_the_suites(
        run_dir: Path, speculative: str, engine: str, top: int) -> None:
    record_with(run_dir, speculative, engine, per_request(2.0),
                f"accept_length = {top}.0")  # server_avg, the floors' default definition
    read_run(run_dir)
    data = json.loads((run_dir / RUN_FILE).read_text())
    data["suite"]["document"]["floors"]["accept_length"] = top + 0.5
    (run_dir / RUN_FILE).write_text(json.dumps(data))
    with pytest.raises(BadRecord, match=r"suite\.document\.floors\.accept_length"):
        read_run(run_dir)


def test_a_uno_run_of_short_answers_is_a_valid_record(run_dir: Path) -> None:
    """UNO, num_draft_tokens 4: a step makes at most 3 drafts + 2 = 5 tokens; requests of
    one step each reach 6 in per_request, one more than the draft block + 1."""
    record_with(run_dir, 'algorithm = "UNO"\nnum_draft_tokens = 4', 'kind = "reference"',
                per_request(5.6))
    assert read_run(run_dir).measurement.accept_length == 5.6  # type: ignore[union-attr]


def row(tokens: int, steps: int, correct: int | None = None) -> str:
    return json.dumps({"index": 0, "question_index": 0, "completion_tokens": tokens,
                       "verify_steps": steps, "correct_drafts": correct,
                       "latency_s": 0.5}) + "\n"


@pytest.mark.parametrize(("speculative", "engine", "top"), BOUNDS)
def test_request_rows_are_bounded_by_the_records_settings(
        run_dir: Path, speculative: str, engine: str, top: int) -> None:
    """A request makes at most T tokens a verify step and its prefill token; its correct
    drafts are at most T - k a step (k: 2 for UNO, else 1)."""
    record_with(run_dir, speculative, engine, per_request(2.0))
    drafts = top - (2 if "UNO" in speculative else 1)
    (run_dir / REQUESTS_FILE).write_text(row(3 * top + 1, 3, 3 * drafts))
    assert len(read_requests(run_dir)) == 1
    for tokens, correct in ((3 * top + 2, 0), (3 * top, 3 * drafts + 1)):
        (run_dir / REQUESTS_FILE).write_text(row(tokens, 3, correct))
        with pytest.raises(BadRecord, match="line 1"):
            read_requests(run_dir, strict=True)


def test_the_bounds_know_every_algorithm_a_suite_may_name() -> None:
    assert get_args(Speculative.model_fields["algorithm"].annotation) == ALGORITHMS
    assert Speculative().algorithm == DEFAULT_ALGORITHM


def test_a_record_that_names_no_algorithm_a_suite_may_have_gets_the_loosest(
        run_dir: Path) -> None:
    data = json.loads((run_dir / RUN_FILE).read_text())
    data["suite"]["document"]["speculative"] = {"algorithm": "FUTURE", "num_draft_tokens": 4}
    assert step_of(data) == loosest_bound(4, None, None, "reference")
    assert step_of(data).accept_length("per_request") == 6  # UNO's: 3 drafts + 2, prefill
