"""The reference engine's HTTP API: SGLang 0.5.23 shapes and exact spec accounting.

Every test talks to a real server process over HTTP; responses are read with the
harness's own SGLang parsers (`harness.metrics.measure`), so the engine is held to the format the
harness expects from SGLang.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import psutil
import pytest

from harness.engines.sglang.api import parse_generate as parse_generate_response
from harness.engines.sglang.api import server_figure as server_accept_length
from tests.reference_engine.conftest import ENGINE_PYTHON, STOP, Server

pytestmark = pytest.mark.slow

BLOCK = 8
SPEC_KEYS = {"spec_verify_ct", "spec_accept_length", "spec_accept_rate",
             "spec_num_correct_drafts", "spec_num_proposed_drafts",
             "spec_correct_drafts_histogram"}


def test_health_endpoints(server: Server) -> None:
    assert server.call("/health") == (200, "")
    assert server.call("/health_generate")[0] == 200


def test_server_info_records_threads_and_weights(server: Server,
                                                 checkpoints: tuple) -> None:
    from reference_engine.checkpoints import served_weights_sha256
    from reference_engine.loading import REPRODUCIBLE_ENV

    info = server.call("/server_info")[1]
    assert info["torch_num_threads"] == 1 and info["torch_num_interop_threads"] == 1
    assert info["workers"] >= 1
    assert info["reproducible_env"] == REPRODUCIBLE_ENV
    assert info["weights_sha256"] == served_weights_sha256(*checkpoints)


def test_server_info_has_sglang_args(server: Server) -> None:
    status, info = server.call("/server_info")
    assert status == 200
    assert info["speculative_algorithm"] == "DFLASH"
    assert info["speculative_num_draft_tokens"] == BLOCK
    assert info["model_path"].endswith("target")
    assert info["speculative_draft_model_path"].endswith("draft")
    assert info["version"].startswith("0.5.23")
    assert isinstance(info["internal_states"], list) and len(info["internal_states"]) == 1
    assert [layer["index"] for layer in info["attention_layers"]] == [0, 1, 2, 3, 4]


def check_accounting(payload: dict, max_new_tokens: int) -> None:
    meta = payload["meta_info"]
    parsed = parse_generate_response(payload)
    assert meta.keys() >= SPEC_KEYS
    assert meta["cached_tokens"] == 0
    assert meta["completion_tokens"] == len(payload["output_ids"]) <= max_new_tokens
    steps, histogram = meta["spec_verify_ct"], meta["spec_correct_drafts_histogram"]
    assert parsed.verify_steps == steps > 0
    assert meta["spec_accept_length"] == pytest.approx(meta["completion_tokens"] / steps)
    # Each verify step yields its accepted drafts plus one bonus; prefill yields one more.
    assert 1 <= meta["spec_accept_length"] <= BLOCK + 1 / steps
    assert sum(histogram) == steps and len(histogram) <= BLOCK
    correct = sum(k * count for k, count in enumerate(histogram))
    assert meta["spec_num_correct_drafts"] == correct
    assert meta["spec_num_proposed_drafts"] == steps * (BLOCK - 1)
    assert meta["spec_accept_rate"] == pytest.approx(correct / (steps * (BLOCK - 1)))
    reason = meta["finish_reason"]
    assert reason["type"] in {"stop", "length"}
    if reason["type"] == "length":
        assert reason == {"type": "length", "length": max_new_tokens}
        assert meta["completion_tokens"] == max_new_tokens


def test_generate_accounting_is_exact(server: Server, prompts: list[str]) -> None:
    for prompt in prompts[:4]:
        check_accounting(server.generate(prompt, max_new_tokens=64, stop=STOP), 64)


def test_sampled_generation_is_seeded_and_exact(server: Server, prompts: list[str]) -> None:
    params = {"temperature": 0.8, "top_p": 0.95, "max_new_tokens": 40, "sampling_seed": 7}
    first = server.generate(prompts[0], **params)
    again = server.generate(prompts[0], **params)
    other = server.generate(prompts[0], **{**params, "sampling_seed": 8})
    check_accounting(first, 40)
    check_accounting(other, 40)
    assert first["output_ids"] == again["output_ids"]
    assert first["output_ids"] != other["output_ids"]


def test_server_average_is_cumulative_and_flushed(server: Server, prompts: list[str]) -> None:
    assert server.call("/flush_cache", {})[0] == 200
    assert "avg_spec_accept_length" not in server.call("/server_info")[1]["internal_states"][0]
    metas = [server.generate(p, max_new_tokens=40, stop=STOP)["meta_info"] for p in prompts[:3]]
    metas.append(server.generate(prompts[3], max_new_tokens=9)["meta_info"])  # cut by length
    steps = sum(m["spec_verify_ct"] for m in metas)
    tokens = sum(m["completion_tokens"] for m in metas)
    correct = sum(m["spec_num_correct_drafts"] for m in metas)
    # SGLang's server figure adds, per verify step, its correct drafts + 1, whatever a stop
    # or max_new_tokens then cuts; the prefill token is in no step.
    server_figure = server_accept_length(server.call("/server_info")[1])
    assert server_figure == pytest.approx((correct + steps) / steps)
    assert server_figure >= (tokens - len(metas)) / steps
    status, body = server.call("/flush_cache", method="GET")
    assert status == 200 and body.startswith("Cache flushed")
    assert server_accept_length(server.call("/server_info")[1]) is None


def test_stop_string_ends_and_is_excluded(server: Server, prompts: list[str]) -> None:
    free = server.generate(prompts[1], max_new_tokens=48)
    words = [word for word in free["text"].split() if len(word) > 2]
    assert words, free["text"]
    stop = words[len(words) // 2]
    stopped = server.generate(prompts[1], max_new_tokens=48, stop=[stop])
    assert stopped["meta_info"]["finish_reason"] == {"type": "stop", "matched": stop}
    assert stopped["text"] == free["text"][: free["text"].find(stop)]
    assert stopped["meta_info"]["completion_tokens"] < free["meta_info"]["completion_tokens"]
    check_accounting(stopped, 48)


def test_128_concurrent_requests_all_succeed_and_equal_sequential(
        server: Server, prompts: list[str]) -> None:
    """The listen queue holds the harness's largest concurrency; arrival order changes
    nothing: greedy and seeded sampled outputs and counts equal one-at-a-time decoding."""
    def key(payload: dict) -> tuple:
        meta = payload["meta_info"]
        return (tuple(payload["output_ids"]), meta["spec_verify_ct"],
                meta["spec_num_correct_drafts"], tuple(meta["spec_correct_drafts_histogram"]))

    variants = [{"max_new_tokens": 16}, {"max_new_tokens": 16, "temperature": 0.7,
                                         "sampling_seed": 11}]
    jobs = [(p, v) for p in prompts[:4] for v in variants]
    sequential = {i: key(server.generate(p, **v)) for i, (p, v) in enumerate(jobs)}
    order = [i % len(jobs) for i in range(128)][::-1]
    with ThreadPoolExecutor(max_workers=128) as pool:
        replies = list(pool.map(lambda i: server.call("/generate", {
            "text": jobs[i][0], "sampling_params": {"temperature": 0, **jobs[i][1]}}), order))
    assert [status for status, _ in replies] == [200] * 128
    assert [key(body) for _, body in replies] == [sequential[i] for i in order]


def test_v1_completions_has_no_meta_info(server: Server, prompts: list[str]) -> None:
    status, body = server.call("/v1/completions", {
        "model": "tiny", "prompt": prompts[2], "max_tokens": 32, "temperature": 0,
        "stop": STOP})
    assert status == 200
    assert "meta_info" not in body and "meta_info" not in body["choices"][0]
    native = server.generate(prompts[2], max_new_tokens=32, stop=STOP)
    assert body["object"] == "text_completion"
    assert body["choices"][0]["text"] == native["text"]
    assert body["choices"][0]["finish_reason"] == native["meta_info"]["finish_reason"]["type"]
    assert body["usage"]["completion_tokens"] == native["meta_info"]["completion_tokens"]


def test_bad_requests_get_400(server: Server) -> None:
    for body in ({"text": 3}, {"text": "x", "sampling_params": {"top_p": 0}},
                 {"text": "x", "sampling_params": {"max_tokens": 4}}):
        status, reply = server.call("/generate", body)
        assert status == 400 and reply["error"]["message"].strip()
    assert server.call("/nope")[0] == 404


def test_bad_checkpoint_exits_with_message(tmp_path) -> None:
    (tmp_path / "config.json").write_text("{}")
    result = subprocess.run(
        [ENGINE_PYTHON, "-m", "reference_engine", "--target", str(tmp_path / "none"),
         "--draft", str(tmp_path), "--port", "1"],
        capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 2
    assert "target checkpoint" in result.stderr and "config.json" in result.stderr


def test_corrupt_weights_exit_with_message(tmp_path, checkpoints) -> None:
    target = tmp_path / "target"
    target.mkdir()
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json"):
        (target / name).write_bytes((checkpoints[0] / name).read_bytes())
    (target / "model.safetensors").write_bytes(b"not safetensors")
    result = subprocess.run(
        [ENGINE_PYTHON, "-m", "reference_engine", "--target", str(target),
         "--draft", str(checkpoints[1]), "--port", "1"],
        capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 2
    assert "cannot load checkpoints" in result.stderr


def test_harness_side_stays_torch_free() -> None:
    code = ("import sys, harness.cli, harness.commands.reference, "
            "reference_engine.checkpoints, reference_engine.recipe; "
            "reference_engine.checkpoints.ensure_checkpoints(); "
            "harness.cli.build_parser(); "
            "sys.exit(1 if {'torch', 'transformers', 'dflash'} & set(sys.modules) else 0)")
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


def test_corrupt_tokenizer_exits_with_message_and_no_worker(tmp_path, checkpoints) -> None:
    """The workers start before the tokenizer loads: a bad tokenizer still ends with its
    message, exit 2 and no worker left behind."""
    target = tmp_path / "target"
    target.mkdir()
    for item in checkpoints[0].iterdir():
        (target / item.name).write_bytes(item.read_bytes())
    (target / "tokenizer.json").write_text("{oops")
    process = subprocess.Popen(
        [ENGINE_PYTHON, "-m", "reference_engine", "--target", str(target),
         "--draft", str(checkpoints[1]), "--port", "1", "--workers", "2"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    _, err = process.communicate(timeout=300)
    assert process.returncode == 2
    assert "cannot load the tokenizer" in err and "Traceback" not in err
    time.sleep(0.5)
    assert _session_members(process.pid) == []  # the spawned workers went with it


def _session_members(session: int) -> list[int]:
    members = []
    for pid in psutil.pids():
        with contextlib.suppress(OSError):
            if os.getsid(pid) == session and psutil.Process(pid).status() != "zombie":
                members.append(pid)
    return members
