"""Each accept-length definition pinned to the computation of the engine or benchmark that
gates on it, from the same request rows (docs/references.md, "Definitions").

- `per_request_mean` against the DFlash authors' own reduction (PyPI `dflash` 0.1.0,
  `dflash.benchmark._print_decode_summary`, run here from the installed package), and
  against vLLM's reference-acceptance test, whose code is not in vLLM's wheel: its loop
  (`run_acceptance_length_eval`, tests/v1/e2e/spec_decode/acceptance_rates/utils.py at
  vllm-project/vllm 025aa2e8; `compute_acceptance_len`, tests/v1/e2e/spec_decode/utils.py at
  08de63b4) is replayed on cumulative counters, one prompt at a time;
- `spec_accept_length_mean` against the same package's SGLang path (`_run_openai`), its
  HTTP call answered with each row's SGLang meta_info;
- `server_avg` against TensorRT-LLM's `compute_acceptance_length`, pooled per iteration.
"""

from __future__ import annotations

import argparse
import random
import re
import threading

import pytest
from dflash import benchmark

from harness.errors import MissingMetric
from harness.metrics import definitions
from harness.metrics.measure import summarise
from harness.results.record import RequestRow


def _rows(n: int = 40, seed: int = 1, width: int = 16) -> list[RequestRow]:
    """Requests whose verify steps accept 0..width-1 drafts, each step's count known."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        skill = rng.random()
        histogram = [0] * width
        for _ in range(rng.randint(1, 60)):
            histogram[min(int(rng.expovariate(1.0 / (1 + 8 * skill))), width - 1)] += 1
        steps = sum(histogram)
        drafts = sum(k * count for k, count in enumerate(histogram))
        rows.append(RequestRow(index=i, question_index=i, completion_tokens=1 + drafts + steps,
                               verify_steps=steps, correct_drafts=drafts,
                               spec_accept_length=(1 + drafts + steps) / steps, latency_s=1.0,
                               accept_histogram=histogram))
    return rows


def test_per_request_mean_is_the_dflash_benchmarks_average(capsys: pytest.CaptureFixture[str]
                                                            ) -> None:
    rows = _rows()
    responses = []
    for row in rows:  # each verify step makes its accepted drafts + 1 (dflash/model.py)
        per_step = [k + 1 for k, count in enumerate(row.accept_histogram or []) for _ in
                    range(count)]
        responses.append({1: benchmark._make_decode_metrics(row.completion_tokens, 1.0, []),
                          16: benchmark._make_decode_metrics(row.completion_tokens, 2.0,
                                                             per_step)})
    benchmark._print_decode_summary(responses, 16)
    printed = re.search(r"Average Acceptance length: ([0-9.]+)", capsys.readouterr().out)
    assert printed is not None
    ours = definitions.accept_length_of(rows, "per_request_mean")
    assert ours == pytest.approx(float(printed.group(1)), abs=0.005)  # it prints 2 decimals
    pooled = definitions.accept_length_of(rows, "server_avg")
    assert abs(ours - pooled) > 0.01  # the two reductions differ on these rows


def _vllm_reference_loop(rows: list[RequestRow]) -> float:
    """vLLM's run_acceptance_length_eval on counters: after each prompt the cumulative
    vllm:spec_decode_num_drafts / num_accepted_tokens; the prompt's figure is
    1 + delta accepted / delta drafts, 1 when no draft was made; the mean over prompts."""
    drafts = accepted = 0
    figures = []
    for row in rows:  # one prompt at a time: its counts are the counters' delta
        before = (drafts, accepted)
        drafts += row.verify_steps  # vLLM counts one draft per verify step
        accepted += row.correct_drafts or 0
        delta_drafts, delta_accepted = drafts - before[0], accepted - before[1]
        figures.append(1 if delta_drafts <= 0 else 1 + delta_accepted / delta_drafts)
    return sum(figures) / len(figures)


def test_per_request_mean_is_vllms_reference_loop() -> None:
    rows = _rows(seed=2)
    no_draft = RequestRow(index=99, question_index=99, completion_tokens=1, verify_steps=0,
                          correct_drafts=0, spec_accept_length=0.0, latency_s=0.1)
    for sample in (rows, [*rows, no_draft]):
        assert definitions.accept_length_of(sample, "per_request_mean") == pytest.approx(
            _vllm_reference_loop(sample), rel=1e-12)


def test_the_mean_and_the_pooled_figure_can_rank_two_drafters_apart() -> None:
    # vllm-project/vllm #42508: A accepts a lot on one long answer, B a little everywhere
    def row(i: int, steps: int, drafts: int) -> RequestRow:
        return RequestRow(index=i, question_index=i, completion_tokens=1 + drafts + steps,
                          verify_steps=steps, correct_drafts=drafts,
                          spec_accept_length=(1 + drafts + steps) / steps, latency_s=1.0)
    a = [row(0, 100, 700), row(1, 10, 0), row(2, 10, 0)]
    b = [row(0, 200, 500), row(1, 10, 25), row(2, 10, 25)]
    pooled = [definitions.accept_length_of(x, "server_avg") for x in (a, b)]
    means = [definitions.accept_length_of(x, "per_request_mean") for x in (a, b)]
    assert (pooled[0] > pooled[1]) and (means[0] < means[1])


def test_spec_accept_length_mean_is_the_dflash_benchmarks_sglang_figure(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    rows = _rows(seed=3)
    replies = iter(rows)
    lock = threading.Lock()

    def answer(base_url: str, messages: list[dict[str, str]], *, max_new_tokens: int,
               **_: object) -> dict[str, object]:
        if max_new_tokens == 64:  # the benchmark's warm-up
            return {"usage": {"completion_tokens": 1}, "meta_info": {}}
        with lock:
            row = next(replies)
        # SGLang's meta_info for one request: spec_accept_length = completion / verify_ct
        return {"usage": {"completion_tokens": row.completion_tokens},
                "meta_info": {"spec_verify_ct": row.verify_steps,
                              "spec_accept_length": row.completion_tokens / row.verify_steps}}

    monkeypatch.setattr(benchmark, "send_openai", answer)
    monkeypatch.setattr(benchmark, "load_and_process_dataset",
                        lambda name: [{"turns": [f"q{i}"]} for i in range(len(rows) + 4)])
    args = argparse.Namespace(concurrency=4, dataset="gsm8k", num_prompts=len(rows),
                              base_url="http://127.0.0.1:1", model="m", max_new_tokens=2048,
                              temperature=0.0, top_p=1.0, top_k=0, timeout_s=1,
                              reasoning=None, backend="openai")
    benchmark._run_openai(args)
    printed = re.search(r"Accept length:\s+([0-9.]+)", capsys.readouterr().out)
    assert printed is not None
    ours = definitions.accept_length_of(rows, "spec_accept_length_mean")
    assert ours == pytest.approx(float(printed.group(1)), abs=0.0005)  # 3 decimals printed


def test_server_avg_is_tensorrt_llms_compute_acceptance_length() -> None:
    """TensorRT-LLM pools (sum accepted + sum requests with drafts) / sum requests with
    drafts over iterations; one request in one iteration is one verify step, so spreading
    every request's steps over iterations in any order gives server_avg."""
    rows = _rows(seed=4)
    iterations: dict[int, list[int]] = {}
    rng = random.Random(0)
    for row in rows:
        accepted = [k for k, count in enumerate(row.accept_histogram or []) for _ in
                    range(count)]
        start = rng.randint(0, 30)
        for offset, k in enumerate(accepted):
            iterations.setdefault(start + offset, []).append(k)
    with_drafts = sum(len(ks) for ks in iterations.values())
    trtllm = (sum(sum(ks) for ks in iterations.values()) + with_drafts) / with_drafts
    assert definitions.accept_length_of(rows, "server_avg") == pytest.approx(trtllm, rel=1e-12)


def test_a_run_records_each_mean_with_its_ci_and_judges_in_one() -> None:
    rows = _rows(seed=5)
    measured = summarise(rows, "per_request_mean", duration_s=10.0, server_figure=None)
    values = [1 + r.correct_drafts / r.verify_steps for r in rows]  # type: ignore[operator]
    assert measured.accept_length == pytest.approx(sum(values) / len(values))
    assert measured.accept_length_per_request_mean == measured.accept_length
    low, high = measured.accept_length_ci or (0.0, 0.0)
    assert low < measured.accept_length < high
    assert measured.accept_length_per_request_mean_ci == measured.accept_length_ci
    assert measured.accept_length_spec_accept_length_mean == pytest.approx(
        sum(r.completion_tokens / r.verify_steps for r in rows) / len(rows))


def test_a_definition_the_rows_cannot_give_is_an_error() -> None:
    rows = [RequestRow(index=0, question_index=0, completion_tokens=20, verify_steps=5,
                       correct_drafts=None, spec_accept_length=4.0, latency_s=1.0)]
    with pytest.raises(MissingMetric, match="per_request_mean"):
        summarise(rows, "per_request_mean", duration_s=1.0, server_figure=None)
    assert summarise(rows, "per_request", 1.0, None).accept_length_per_request_mean is None


def test_the_sequential_sample_and_the_paired_gate_take_the_means_weights() -> None:
    from harness.metrics.floor_checks import floor_checks
    from harness.metrics.paired_gate import Tolerance, paired_test
    from harness.suite.entries import Floors

    rows = _rows(seed=6)
    [check] = floor_checks(Floors(accept_length=2.0, metric="per_request_mean"))
    sample = check.sample(rows)
    assert sample.steps == [1] * len(rows)  # type: ignore[union-attr]  # a request weighs 1
    assert sum(sample.tokens) / sum(sample.steps) == pytest.approx(  # type: ignore[union-attr]
        definitions.accept_length_of(rows, "per_request_mean"))
    worse = [row.model_copy(update={"correct_drafts": (row.correct_drafts or 0) // 2})
             for row in rows]
    pairs = [definitions.metric_pairs(side, "per_request_mean") for side in (rows, worse)]
    found = paired_test(pairs[0], pairs[1], Tolerance(0.02, True, "per_request_mean"))
    assert found.decision == "worse"  # halving every request's accepted drafts is caught
