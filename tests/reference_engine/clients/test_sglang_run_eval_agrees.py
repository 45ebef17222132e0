"""SGLang 0.5.23's own GSM8K client (`run_eval`) against the reference engine, in all three
API modes, and its figures equal the harness's for the same requests.

For each mode: flush, run `python -m sglang.test.run_eval --eval-name gsm8k --api MODE` on
a few questions, read the server's `avg_spec_accept_length`, then send the same prompts
through `/generate` (the path the harness measures) and compute, with the harness's own
parsing and grading, the GSM8K score, the server-definition accept length and (chat mode,
which records meta_info) the mean per-request `spec_accept_length`. Greedy decoding is
deterministic and independent of concurrency, so every figure must agree.
"""

from __future__ import annotations

import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from harness.engines.sglang.api import parse_generate as parse_generate_response
from harness.engines.sglang.api import server_figure as server_accept_length
from harness.suite.model import GSM8KWorkload
from harness.workloads.gsm8k import (
    STOP_STRINGS,
    build_prompts,
    extract_answer,
    is_correct,
    load_gsm8k,
)
from tests.reference_engine.conftest import Server

pytestmark = pytest.mark.slow

QUESTIONS = 4
MAX_TOKENS = 64


def run_eval(server: Server, client: Path, data: Path, api: str) -> str:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(client), os.getcwd()]),
           "OPENAI_API_KEY": "EMPTY"}
    command = [sys.executable, "-m", "sglang.test.run_eval", "--base-url", server.base,
               "--eval-name", "gsm8k", "--api", api, "--num-examples", str(QUESTIONS),
               "--num-threads", str(QUESTIONS), "--max-tokens", str(MAX_TOKENS),
               "--gsm8k-data-path", str(data)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900,
                          check=False)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    # The client swallows failures into retries (about 63 s each) or an empty answer.
    assert "Rate limit exception" not in output and "Bad Request Error" not in output, output
    return output


def harness_figures(server: Server, data: Path, api: str) -> dict[str, float]:
    prompts = build_prompts(load_gsm8k(data), GSM8KWorkload(shots=5, questions=QUESTIONS))
    params = {"max_new_tokens": MAX_TOKENS, "temperature": 0.0, "top_p": 1.0}
    if api == "chat":
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(server.call("/model_info")[1]["model_path"])
        texts = [tokenizer.apply_chat_template([{"role": "user", "content": p.text}],
                                               tokenize=False, add_generation_prompt=True)
                 for p in prompts]
    else:
        texts = [p.text for p in prompts]
        params["stop"] = list(STOP_STRINGS)
    replies = [server.call("/generate", {"text": t, "sampling_params": params})[1]
               for t in texts]
    parsed = [parse_generate_response(r) for r in replies]
    steps = sum(p.verify_steps for p in parsed)
    correct = sum(r["meta_info"]["spec_num_correct_drafts"] for r in replies)
    return {
        "score": statistics.mean(is_correct(extract_answer(p.text), q.label)
                                 for p, q in zip(parsed, prompts, strict=True)),
        "server_avg": (correct + steps) / steps,
        "per_request_mean": statistics.mean(r["meta_info"]["spec_accept_length"]
                                            for r in replies),
    }


@pytest.mark.parametrize("api", ["completion", "generate", "chat"])
def test_run_eval_agrees_with_the_harness(api: str, server: Server, run_eval_path: Path,
                                          gsm8k_path: Path) -> None:
    assert server.call("/flush_cache", {})[0] == 200
    output = run_eval(server, run_eval_path, gsm8k_path, api)
    server_figure = server_accept_length(server.call("/server_info")[1])
    ours = harness_figures(server, gsm8k_path, api)

    score = float(re.search(r"^Score: ([0-9.]+)$", output, re.M).group(1))
    assert score == pytest.approx(ours["score"], abs=5e-4)
    # The server's own counter over run_eval's requests = the harness's exact figure.
    assert server_figure == pytest.approx(ours["server_avg"], rel=1e-12)
    summary = re.search(r"from meta_info\): n=(\d+) mean=([0-9.]+)", output)
    if api == "chat":  # only the chat sampler asks for meta_info (return_meta_info)
        assert summary is not None, output
        assert int(summary.group(1)) == QUESTIONS
        assert float(summary.group(2)) == pytest.approx(ours["per_request_mean"], abs=5e-5)
    else:
        assert summary is None and "no per-request spec_accept_length" in output
