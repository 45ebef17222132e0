"""SGLang's own clients against the real server the harness launched, and the test double
(tests/fake_sglang) answering the same requests as the real server.

One real SGLang 0.5.23 server (the NGRAM CPU suite's launch line, from the harness's own
adapter and launch code; `ngram_server`, shared with the A/A history) serves: SGLang's
`run_eval` gsm8k in its three API modes (chat, completion, generate), each followed by
SGLang's test kit reading /server_info
(`sglang.test.kits.eval_accuracy_kit._check_accept_length`); then a window measured by the
harness's adapter, whose server_avg must equal the kit's figure for the same window. The
figures are printed side by side (`pytest -s`).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from harness.engines.sglang import ADAPTER
from tests.fake_sglang.recording import shape
from tests.sglang_cpu.conftest import REPO, STAND_IN, serving_ngram_suite

GSM8K = Path(os.environ.get("HARNESS_DATA_DIR", REPO.parent / "shared" / "data")) / "gsm8k"
FAKE = REPO / "tests" / "fake_sglang"
PROMPTS = [f"Question: {a} plus {b} is what?\nAnswer:" for a, b in
           [(3, 4), (12, 30), (7, 8), (25, 17), (9, 9), (40, 2)]]
PARAMS = {"temperature": 0.0, "max_new_tokens": 32}


@pytest.fixture(scope="module")
def fake(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The double, started with the same flags as the real server."""
    env = {"PYTHONPATH": os.pathsep.join([str(FAKE), str(REPO)])}
    with serving_ngram_suite(sys.executable, env,
                             tmp_path_factory.mktemp("fake") / "server.log") as url:
        yield url


def _engine_python(sglang_cpu: Any, script: str, *args: str) -> str:
    # SGLang's clients import sglang.srt, which needs the stand-ins too (torchvision)
    env = {**os.environ, "PYTHONPATH": str(STAND_IN)}
    done = subprocess.run([sglang_cpu.python, "-c", script, *args], capture_output=True,
                          text=True, timeout=1200, check=False, cwd=REPO, env=env)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    return done.stdout


KIT = """
import sys, unittest
from sglang.test.kits.eval_accuracy_kit import _check_accept_length
_check_accept_length(unittest.TestCase(), sys.argv[1])
"""

RUN_EVAL = """
import sys, types, requests
from sglang.test.run_eval import run_eval
base_url, api, data = sys.argv[1:4]
requests.post(base_url + "/flush_cache")
metrics = run_eval(types.SimpleNamespace(
    base_url=base_url, model=None, eval_name="gsm8k", api=api, num_examples=8,
    num_threads=4, max_tokens=64, temperature=0.0, num_shots=0, gsm8k_data_path=data,
    host=None, port=None, repeat=1, top_p=None, top_k=None, min_p=None,
    chat_template_kwargs=None, reasoning_effort=None, thinking_mode=None))
print("RUN_EVAL_SCORE", metrics["score"])
"""


def _kit_figure(sglang_cpu: Any, base_url: str) -> float | None:
    out = _engine_python(sglang_cpu, KIT, base_url)
    found = re.search(r"avg_spec_accept_length=([0-9.]+)", out)
    return float(found.group(1)) if found else None


@pytest.mark.parametrize("api", ["chat", "completion", "generate"])
def test_run_eval_gsm8k_and_the_kit(api: str, ngram_server: str, sglang_cpu: Any) -> None:
    out = _engine_python(sglang_cpu, RUN_EVAL, ngram_server, api, str(GSM8K / "test.jsonl"))
    score = float(re.search(r"RUN_EVAL_SCORE ([0-9.]+)", out).group(1))
    assert 0.0 <= score <= 1.0
    figure = _kit_figure(sglang_cpu, ngram_server)
    print(f"run_eval gsm8k --api {api}: score {score:.3f}; SGLang's kit reads "
          f"/server_info avg_spec_accept_length {figure}")
    assert figure is not None and figure > 1.0


def test_harness_server_avg_equals_the_kits_figure(ngram_server: str, sglang_cpu: Any) -> None:
    with httpx.Client(base_url=ngram_server, timeout=600, trust_env=False) as client:
        assert client.post("/flush_cache").status_code == 200
        parsed = []
        for i, text in enumerate(PROMPTS):
            reply = client.post("/generate", json=ADAPTER.generate_body(text, PARAMS, f"w{i}"))
            parsed.append(ADAPTER.parse_generate(reply.json(), f"request {i}"))
        info = client.get("/server_info").json()
    steps = sum(p.verify_steps for p in parsed)
    server_avg = (sum(p.correct_drafts for p in parsed) + steps) / steps
    per_request = sum(p.completion_tokens for p in parsed) / steps
    kit = _kit_figure(sglang_cpu, ngram_server)
    print(f"same window: harness server_avg {server_avg:.6f} (per_request {per_request:.6f}); "
          f"SGLang's kit /server_info {kit}; adapter {ADAPTER.server_figure(info)}")
    assert kit == pytest.approx(server_avg, abs=5e-5)  # the kit prints 4 decimals
    assert ADAPTER.server_figure(info) == pytest.approx(server_avg, abs=1e-12)


# ------------------------------------------------------------ the double against the real


def _exchange(base: str) -> dict[str, Any]:
    answers: dict[str, Any] = {}
    with httpx.Client(base_url=base, timeout=600, trust_env=False) as client:
        for name, method, path, body in [
            ("health_generate", "GET", "/health_generate", None),
            ("health", "GET", "/health", None),
            ("flush GET", "GET", "/flush_cache", None),
            ("flush POST", "POST", "/flush_cache", None),
            ("generate", "POST", "/generate",
             ADAPTER.generate_body(PROMPTS[0], PARAMS, "cmp-0")),
            ("chat", "POST", "/v1/chat/completions",
             ADAPTER.chat_body([{"role": "user", "content": PROMPTS[1]}], PARAMS, "cmp-1", {})),
            ("unknown route", "GET", "/no_such_route", None),
            ("server_info", "GET", "/server_info", None),
        ]:
            reply = client.request(method, path, json=body)
            kind = reply.headers.get("content-type", "").split(";")[0]
            payload = reply.json() if kind == "application/json" else None
            answers[name] = {"status": reply.status_code, "content_type": kind,
                             "shape": shape(payload)}
    return answers


# Keys of /server_info and of meta_info the harness reads (harness/engines/sglang/api.py).
SERVER_INFO_KEYS = ("speculative_algorithm", "speculative_num_draft_tokens",
                    "speculative_draft_model_path", "decode_log_interval", "version",
                    "internal_states")
META_KEYS = ("id", "finish_reason", "prompt_tokens", "completion_tokens", "spec_verify_ct",
             "spec_accept_length", "spec_num_correct_drafts", "spec_correct_drafts_histogram")


def test_the_double_answers_like_the_real_server(ngram_server: str, fake: str) -> None:
    mine, theirs = _exchange(fake), _exchange(ngram_server)
    for answers in (theirs, mine):  # /server_info: only the keys the harness reads
        shape = answers["server_info"]["shape"]
        answers["server_info"]["shape"] = {k: shape.get(k) for k in SERVER_INFO_KEYS}
    print(json.dumps({"real": theirs, "fake": mine}, indent=1))
    for name in theirs:
        assert mine[name]["status"] == theirs[name]["status"], name
        assert mine[name]["content_type"] == theirs[name]["content_type"], name
    for name in ("generate", "chat"):
        assert mine[name]["shape"].keys() == theirs[name]["shape"].keys(), name
    real_meta = theirs["generate"]["shape"]["meta_info"]
    fake_meta = mine["generate"]["shape"]["meta_info"]
    for key in META_KEYS:
        assert fake_meta.get(key) == real_meta.get(key), key
    assert fake_meta == real_meta  # every key and type of meta_info
    for key in SERVER_INFO_KEYS:
        ours, real_value = mine["server_info"]["shape"][key], theirs["server_info"]["shape"][key]
        if key == "internal_states":  # the real one reports much more per rank
            ours, real_value = (v[0].get("avg_spec_accept_length") for v in (ours, real_value))
        assert ours == real_value, key
