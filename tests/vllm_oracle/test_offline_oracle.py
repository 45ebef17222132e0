"""vLLM's offline API as the oracle of the harness's figure (`nox -s vllm_cpu`).

The session first runs `harness run tiny_dflash_vllm_cpu` (concurrency 4, GSM8K's stop
strings, which the harness applies itself: harness.engines.vllm.stops). This test gives
the same prompts, greedy settings and stop strings to vLLM's own `LLM(...).generate` in the
same vLLM environment, with the engine settings vLLM's own parser reads from the run's
launch line, and reads vLLM's counters with `LLM.get_metrics()` (what vLLM's acceptance
tests do: tests/v1/e2e/spec_decode/acceptance_rates/utils.py): the run's verify steps,
accepted drafts and server_avg (1 + accepted / drafts) must equal vLLM's, and each
request's text and tokens must equal vLLM's own answer with the stop strings.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from harness.engines.registry import adapter_for
from harness.files import default_results_dir
from harness.suite.checkpoints import Models
from harness.suite.model import load_suite
from harness.workloads import prepare
from tests.vllm_oracle.vllm_code import parse_lines, run_vllm

SUITE = "tiny_dflash_vllm_cpu"

OFFLINE = r"""
import json, sys
from vllm import LLM, SamplingParams
job = json.loads(sys.argv[1])
parsed = job["engine"]
llm = LLM(model=job["target"], speculative_config=parsed["speculative_config"],
          seed=parsed["seed"], tensor_parallel_size=parsed["tp"],
          max_model_len=parsed["max_model_len"], dtype=job["dtype"],
          max_num_seqs=parsed["max_num_seqs"], enforce_eager=parsed["enforce_eager"],
          disable_log_stats=False)  # get_metrics() needs the stat loggers
params = SamplingParams(temperature=0.0, max_tokens=job["max_tokens"], stop=job["stop"])
outputs = llm.generate(job["prompts"], params, use_tqdm=False)
totals = {}
for metric in llm.get_metrics():
    if metric.name.startswith("vllm:spec_decode_num_") and hasattr(metric, "value"):
        totals[metric.name] = totals.get(metric.name, 0) + metric.value
print(json.dumps({"totals": totals,
                  "texts": [o.outputs[0].text for o in outputs],
                  "tokens": [len(o.outputs[0].token_ids) for o in outputs],
                  "finish": [o.outputs[0].finish_reason for o in outputs]}))
"""


def latest_run() -> Path:
    runs = sorted((default_results_dir() / "runs" / SUITE).glob("*/run.json"))
    for path in reversed(runs):
        record = json.loads(path.read_text())
        if (record.get("verdict") or {}).get("status") == "pass":
            return path.parent
    if os.environ.get("HARNESS_REQUIRE_VLLM") == "1":
        pytest.fail(f"no passing run of {SUITE} under {default_results_dir()}")
    pytest.skip(f"no passing run of {SUITE} (run `harness run {SUITE}` first)")


def test_the_runs_figure_is_vllms_offline_figure() -> None:
    run_dir = latest_run()
    record = json.loads((run_dir / "run.json").read_text())
    rows = [json.loads(line) for line in (run_dir / "requests.jsonl").read_text().splitlines()]
    suite = load_suite(SUITE).suite
    assert suite.workload.concurrency >= 4
    workload = prepare(suite.workload)
    by_index = {p.question_index: p.turns[0] for p in workload.prompts}
    launch = record["launch"]["command"]
    assert Path(launch[0]).name == "vllm" and launch[1] == "serve"  # vLLM's own CLI
    target = launch[2]
    command = adapter_for("vllm").launch_command(suite, "python", "127.0.0.1", 1,
                                                 Models(target, "/draft"))
    [engine] = parse_lines([command[2:]])
    # the draft the run served (its resolved path is in the run's launch line)
    engine["speculative_config"]["model"] = json.loads(
        launch[launch.index("--speculative-config") + 1])["model"]
    job = {"target": target, "engine": engine, "dtype": engine["dtype"],
           "max_tokens": suite.workload.max_tokens, "stop": list(workload.stop),
           "prompts": [by_index[row["question_index"]] for row in rows]}
    offline = run_vllm(OFFLINE, json.dumps(job), env=dict(suite.engine.env))
    drafts = offline["totals"]["vllm:spec_decode_num_drafts"]
    accepted = offline["totals"]["vllm:spec_decode_num_accepted_tokens"]
    measured = record["measurement"]
    print(f"offline get_metrics: {drafts} drafts, {accepted} accepted, "
          f"1 + accepted / drafts = {1 + accepted / drafts:.6f}; harness: "
          f"{measured['verify_steps']} steps, {measured['correct_drafts']} accepted, "
          f"server_avg {measured['accept_length_server_avg']:.6f}")
    assert (measured["verify_steps"], measured["correct_drafts"]) == (drafts, accepted)
    assert measured["accept_length_server_avg"] == pytest.approx(1 + accepted / drafts,
                                                                 rel=1e-12)
    assert [row["output"] for row in rows] == offline["texts"]
    assert [row["completion_tokens"] for row in rows] == offline["tokens"]
    assert [row["finish_reason"] for row in rows] == offline["finish"]
