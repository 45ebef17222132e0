"""The reference engine's SGLang 0.5.23 API beyond /generate: the routes real clients use.

Each behaviour was read in SGLang 0.5.23's wheel (`sglang/srt/entrypoints/http_server.py`,
`entrypoints/openai/`, `utils/auth.py`); every test talks to a real server process.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.reference_engine.conftest import STOP, Server, start_server, stop_server
from tests.shared import reference_workers

pytestmark = pytest.mark.slow

SECRET = "sk-reference-test-9d1c"
# /model_info's keys in SGLang 0.5.23 (http_server.model_info), embedding models aside.
MODEL_INFO_KEYS = {
    "model_path", "served_model_name", "tokenizer_path", "is_generation",
    "preferred_sampling_params", "weight_version", "load_format", "reasoning_parser",
    "tool_call_parser", "disaggregation_mode", "has_image_understanding",
    "has_audio_understanding", "model_type", "architectures"}


def sse(server: Server, path: str, body: dict[str, Any]) -> list[Any]:
    """The `data:` payloads of a server-sent-event reply, JSON-decoded ("[DONE]" kept)."""
    events = []
    with httpx.stream("POST", server.base + path, json=body, timeout=300) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        for line in response.iter_lines():
            if line.startswith("data: "):
                data = line[len("data: "):]
                events.append(data if data == "[DONE]" else json.loads(data))
    return events


@pytest.fixture(scope="module")
def tokenizer(checkpoints: tuple[Path, Path]):
    transformers = pytest.importorskip("transformers")
    return transformers.AutoTokenizer.from_pretrained(checkpoints[0])


def test_probe_and_info_routes(server: Server) -> None:
    assert server.call("/health") == (200, "")
    assert server.call("/ready") == (200, "")
    for path in ("/model_info", "/get_model_info"):
        status, info = server.call(path)
        assert status == 200 and set(info) == MODEL_INFO_KEYS
        assert info["model_path"].endswith("target") and info["is_generation"] is True
    name = server.call("/v1/models")[1]["data"][0]["id"]
    status, card = server.call(f"/v1/models/{name}")
    assert status == 200 and card["id"] == name and card["max_model_len"] == 4096
    status, missing = server.call("/v1/models/nope")
    assert status == 404 and missing["error"]["code"] == "model_not_found"
    assert server.call("/nope") == (404, {"detail": "Not Found"})


def test_input_ids_body_equals_text(server: Server, prompts: list[str], tokenizer) -> None:
    params = {"max_new_tokens": 24, "temperature": 0}
    by_text = server.call("/generate", {"text": prompts[0], "sampling_params": params})[1]
    ids = tokenizer(prompts[0])["input_ids"]
    by_ids = server.call("/generate", {"input_ids": ids, "sampling_params": params})[1]
    assert by_ids["output_ids"] == by_text["output_ids"]
    assert by_ids["text"] == by_text["text"]
    assert by_ids["meta_info"]["prompt_tokens"] == len(ids)
    status, body = server.call("/generate", {"input_ids": [10**6]})
    assert status == 400 and "token ids" in body["error"]["message"]


def test_context_length_400_as_sglang(server: Server) -> None:
    status, body = server.call("/generate", {"text": "Question: 1\nAnswer:",
                                             "sampling_params": {"max_new_tokens": 6000}})
    assert status == 400
    assert body["error"]["message"].startswith(
        "Requested token count exceeds the model's maximum context length of 4096 tokens.")
    status, body = server.call("/v1/completions", {"prompt": "Q", "max_tokens": 6000})
    assert status == 400 and body["object"] == "error" and body["code"] == 400
    assert "maximum context length of 4096" in body["message"]
    status, body = server.call("/v1/chat/completions", {
        "messages": [{"role": "user", "content": "hi"}], "max_tokens": 6000, "stream": True})
    assert status == 400 and "maximum context length of 4096" in body["message"]


def test_generate_streams_like_sglang(server: Server, prompts: list[str]) -> None:
    body = {"text": prompts[1], "sampling_params": {"max_new_tokens": 40, "temperature": 0,
                                                    "stop": STOP}}
    plain = server.call("/generate", body)[1]
    events = sse(server, "/generate", {**body, "stream": True})
    assert events[-1] == "[DONE]" and len(events) > 2
    chunks, final = events[:-2], events[-2]
    assert all(c["meta_info"]["finish_reason"] is None for c in chunks)
    lengths = [len(c["output_ids"]) for c in chunks]
    assert lengths == sorted(lengths)  # cumulative, as SGLang's default (non-incremental)
    assert final["text"] == plain["text"] and final["output_ids"] == plain["output_ids"]
    same = {k: v for k, v in plain["meta_info"].items()
            if k not in ("id", "e2e_latency", "response_sent_to_client_ts")}
    assert {k: final["meta_info"][k] for k in same} == same


def test_openai_streams_add_up(server: Server, prompts: list[str]) -> None:
    body = {"prompt": prompts[2], "max_tokens": 40, "temperature": 0, "stop": STOP}
    plain = server.call("/v1/completions", body)[1]
    events = sse(server, "/v1/completions", {**body, "stream": True,
                                             "stream_options": {"include_usage": True}})
    assert events[-1] == "[DONE]"
    usage = events[-2]
    assert usage["choices"] == [] and usage["usage"]["completion_tokens"] == (
        plain["usage"]["completion_tokens"])
    choices = [e["choices"][0] for e in events[:-2]]
    assert "".join(c["text"] for c in choices) == plain["choices"][0]["text"]
    assert choices[-1]["finish_reason"] == plain["choices"][0]["finish_reason"]

    chat = {"messages": [{"role": "user", "content": "How many apples?"}], "max_tokens": 30,
            "temperature": 0}
    plain_chat = server.call("/v1/chat/completions", chat)[1]
    events = sse(server, "/v1/chat/completions", {**chat, "stream": True})
    deltas = [e["choices"][0]["delta"] for e in events[:-1]]
    assert deltas[0] == {"reasoning_content": None, "role": "assistant", "content": ""}
    assert "".join(d.get("content") or "" for d in deltas) == (
        plain_chat["choices"][0]["message"]["content"])
    assert events[-2]["choices"][0]["finish_reason"] == "length"
    status, error = server.call("/v1/chat/completions",
                                {**chat, "stream": True, "return_meta_info": True})
    assert status == 400 and error["message"].startswith(
        "return_meta_info is not supported with streaming.")


def test_chat_meta_info_equals_generate_on_the_rendered_prompt(server: Server,
                                                                tokenizer) -> None:
    messages = [{"role": "user", "content": "Tom has 3 apples and buys 4 more. How many?"}]
    body = {"messages": messages, "max_tokens": 48, "temperature": 0, "stop": STOP,
            "return_meta_info": True, "chat_template_kwargs": {"enable_thinking": True}}
    status, chat = server.call("/v1/chat/completions", body)
    assert status == 200
    choice = chat["choices"][0]
    meta = choice["meta_info"]
    assert "meta_info" not in chat  # SGLang puts it on the choice, not the response
    rendered = tokenizer.apply_chat_template(messages, tokenize=False,
                                             add_generation_prompt=True)
    assert rendered.startswith("Question: Tom has 3") and rendered.endswith("\nAnswer:")
    native = server.generate(rendered, max_new_tokens=48, stop=STOP)
    assert choice["message"]["content"] == native["text"]
    for key in ("completion_tokens", "prompt_tokens", "spec_verify_ct",
                "spec_num_correct_drafts", "spec_correct_drafts_histogram", "finish_reason"):
        assert meta[key] == native["meta_info"][key], key
    assert chat["usage"]["completion_tokens"] == meta["completion_tokens"]
    thinking_off = server.call("/v1/chat/completions", {
        **body, "chat_template_kwargs": {"enable_thinking": False}})[1]
    assert thinking_off["choices"][0]["meta_info"]["prompt_tokens"] > meta["prompt_tokens"]
    assert "prompt_token_ids" not in choice  # only when asked, as SGLang
    asked = server.call("/v1/chat/completions", {**body, "return_prompt_token_ids": True})[1]
    assert asked["choices"][0]["prompt_token_ids"] == tokenizer(rendered)["input_ids"]


def test_errors_are_never_empty(server: Server) -> None:
    cases = [("/generate", {"text": 3}), ("/generate", {}),
             ("/generate", {"text": "x", "sampling_params": {"top_p": 0}}),
             ("/generate", {"text": ["a", "b"]}),
             ("/v1/completions", {"prompt": ""}),
             ("/v1/chat/completions", {"messages": []}),
             ("/v1/chat/completions", {"messages": [{"role": "tool", "content": "x"}]})]
    for path, body in cases:
        status, reply = server.call(path, body)
        assert status == 400, (path, body, reply)
        message = reply["error"]["message"] if "error" in reply else reply["message"]
        assert isinstance(message, str) and message.strip(), (path, body, reply)


@pytest.fixture(scope="module")
def keyed(checkpoints: tuple[Path, Path]) -> Iterator[Server]:
    running = start_server(*checkpoints, "--api-key", SECRET, "--workers", "1")
    yield running
    stop_server(running)


def test_api_key_as_sglang(keyed: Server) -> None:
    bearer = {"Authorization": f"Bearer {SECRET}"}
    body = {"text": "Question: 1\nAnswer:", "sampling_params": {"max_new_tokens": 4}}
    assert keyed.call("/generate", body) == (401, {"error": "Unauthorized"})
    assert keyed.call("/generate", body, headers={"Authorization": "Bearer wrong"})[0] == 401
    assert keyed.call("/generate", body, headers=bearer)[0] == 200
    # Probes stay open (k8s and Prometheus need no secret), everything else needs the key.
    assert keyed.call("/health")[0] == 200 and keyed.call("/ready")[0] == 200
    assert keyed.call("/health_generate")[0] == 200
    assert keyed.call("/v1/models")[0] == 401
    assert keyed.call("/flush_cache", {})[0] == 401
    assert keyed.call("/flush_cache", {}, headers=bearer)[0] == 200
    status, info = keyed.call("/server_info", headers=bearer)
    assert status == 200 and SECRET not in json.dumps(info)
    assert info["api_key_required"] is True


def test_a_dead_worker_is_reported_not_hung(checkpoints: tuple[Path, Path],
                                            prompts: list[str]) -> None:
    import signal
    import threading

    running = start_server(*checkpoints, "--workers", "1")
    try:
        server_pid = running.launched.process.pid
        workers = reference_workers(server_pid)
        assert len(workers) == 1
        reply: dict[str, Any] = {}
        request = threading.Thread(target=lambda: reply.setdefault("r", running.call(
            "/generate", {"text": prompts[0], "sampling_params": {"max_new_tokens": 3000}})))
        request.start()
        workers[0].send_signal(signal.SIGKILL)
        request.join(timeout=60)
        status, body = reply["r"]
        assert status == 500 and "exited with code -9" in body["error"]["message"]
        assert running.call("/health")[0] == 503
        status, body = running.call("/generate", {"text": "x"})
        assert status == 500 and "no decoding worker is left" in body["error"]["message"]
    finally:
        stop_server(running)
