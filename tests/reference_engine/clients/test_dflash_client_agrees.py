"""The DFlash authors' client (`dflash benchmark openai`, PyPI dflash==0.1.0) against the
reference engine: it runs to the end, and its token count equals the harness's.

The client loads GSM8K with `datasets.load_dataset("openai/gsm8k", "main")`; with no hub
here, its `DATASETS["gsm8k"]` entry is pointed at the local test.jsonl through `datasets`'
own json loader (everything else, prompt format and selection included, is the client's).

dflash 0.1.0 reads `meta_info` at the top level of the chat response; SGLang 0.5.23 returns
it per choice (`choices[0].meta_info`), as this engine does, so the client prints no
accept length or verify count, against real SGLang as here. The figure it does print,
`Output tokens` (Σ usage.completion_tokens), must equal the harness's for the same
prompts, and the server's accept length over the client's traffic must equal the
harness's exact figure for the same requests.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from harness.engines.sglang.api import server_figure as server_accept_length
from tests.reference_engine.conftest import Server

pytestmark = pytest.mark.slow

PROMPTS, CONCURRENCY, MAX_TOKENS = 4, 2, 48
RUNNER = """
import sys
from dflash import benchmark, cli
benchmark.DATASETS["gsm8k"] = {**benchmark.DATASETS["gsm8k"], "load_args": ("json",),
                               "load_kwargs": {"data_files": sys.argv[1], "split": "train"}}
cli.main(sys.argv[2:])
"""


def client_requests(data: Path) -> list[tuple[str, int]]:
    """(user message, max tokens) of every request the client sends: warm-up, then measured."""
    from dflash import benchmark

    benchmark.DATASETS["gsm8k"] = {**benchmark.DATASETS["gsm8k"], "load_args": ("json",),
                                   "load_kwargs": {"data_files": str(data), "split": "train"}}
    rows = benchmark._select_dataset(benchmark.load_and_process_dataset("gsm8k"),
                                     PROMPTS + CONCURRENCY, repeat=True)
    measured = [(row["turns"][0], MAX_TOKENS) for row in rows[:PROMPTS]]
    warmup = [(row["turns"][0], min(64, MAX_TOKENS)) for row in rows[PROMPTS:]]
    return warmup + measured


def test_dflash_benchmark_openai_agrees(server: Server, gsm8k_path: Path,
                                        tmp_path: Path) -> None:
    pytest.importorskip("dflash")
    pytest.importorskip("datasets")
    transformers = pytest.importorskip("transformers")
    assert server.call("/flush_cache", {})[0] == 200
    env = {**os.environ, "HF_DATASETS_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    done = subprocess.run(
        [sys.executable, "-c", RUNNER, str(gsm8k_path), "benchmark", "openai",
         "--model", "tiny", "--dataset", "gsm8k", "--num-prompts", str(PROMPTS),
         "--concurrency", str(CONCURRENCY), "--max-new-tokens", str(MAX_TOKENS),
         "--base-url", server.base],
        env=env, capture_output=True, text=True, timeout=900, check=False)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert re.search(rf"Num prompts:\s+{PROMPTS}$", output, re.M), output
    server_figure = server_accept_length(server.call("/server_info")[1])
    assert "Accept length:" not in output  # no top-level meta_info, as with SGLang 0.5.23

    os.environ["HF_DATASETS_OFFLINE"] = "1"
    tokenizer = transformers.AutoTokenizer.from_pretrained(
        server.call("/model_info")[1]["model_path"])
    metas = []
    for message, max_tokens in client_requests(gsm8k_path):
        text = tokenizer.apply_chat_template([{"role": "user", "content": message}],
                                             tokenize=False, add_generation_prompt=True)
        reply = server.generate(text, max_new_tokens=max_tokens, temperature=0.0, top_p=1.0)
        metas.append(reply["meta_info"])
    measured = metas[CONCURRENCY:]
    tokens = int(re.search(r"Output tokens:\s+(\d+)", output).group(1))
    assert tokens == sum(m["completion_tokens"] for m in measured)
    steps = sum(m["spec_verify_ct"] for m in metas)
    correct = sum(m["spec_num_correct_drafts"] for m in metas)
    assert server_figure == pytest.approx((correct + steps) / steps, rel=1e-12)
