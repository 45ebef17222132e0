"""Chat and generate exchanges with the real SGLang 0.5.23 server on CPU, recorded, and
the same exchanges put to the test double: each answer reduced to what the harness reads
(status, finish reason, token counts) and the response's shape (keys and types).

    python -m tests.fake_sglang.recording OUT.json   # records the real server (its CPU env)

The recording in `recorded-0.5.23.json` is what the real server answered (the tiny
target, the NGRAM CPU suite's launch line);
`tests/engines/sglang/test_double_answers_as_real_server.py` holds the double to it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import httpx

from harness.engines.sglang import ADAPTER

PROMPT = "Question: Tom has 12 apples and buys 30 more. How many apples does he have?\nAnswer:"
USER = [{"role": "user", "content": PROMPT}]
GREEDY = {"temperature": 0.0}


def _legacy_chat(max_tokens: int) -> dict[str, Any]:
    """A chat body with only the deprecated `max_tokens` (an older client's)."""
    body = ADAPTER.chat_body(USER, {**GREEDY, "max_new_tokens": max_tokens}, "rec-legacy", {})
    del body["max_completion_tokens"]
    body["max_tokens"] = max_tokens
    return body


# name -> (route, body, the token limit the body sets)
EXCHANGES: dict[str, tuple[str, dict[str, Any], int]] = {
    "chat 32": ("/v1/chat/completions",
                ADAPTER.chat_body(USER, {**GREEDY, "max_new_tokens": 32}, "rec-32", {}), 32),
    "chat 8": ("/v1/chat/completions",
               ADAPTER.chat_body(USER, {**GREEDY, "max_new_tokens": 8}, "rec-8", {}), 8),
    "chat sampled": ("/v1/chat/completions",
                     ADAPTER.chat_body(USER, {"temperature": 0.6, "top_p": 0.95,
                                              "max_new_tokens": 12, "sampling_seed": 7},
                                       "rec-seed", {}), 12),
    "chat legacy max_tokens": ("/v1/chat/completions", _legacy_chat(16), 16),
    "generate 32": ("/generate",
                    ADAPTER.generate_body(PROMPT, {**GREEDY, "max_new_tokens": 32}, "rec-gen"),
                    32),
}


def shape(value: Any) -> Any:
    """Keys and types, not values: what a client of the API depends on."""
    if isinstance(value, dict):
        return {k: shape(v) for k, v in sorted(value.items())}
    if isinstance(value, list):
        return [shape(value[0])] if value else []
    return type(value).__name__


def digest(route: str, status: int, payload: Any) -> dict[str, Any]:
    """What the harness reads from one answer, and its shape."""
    found: dict[str, Any] = {"status": status, "shape": shape(payload)}
    if status != 200:
        return found
    if route == "/generate":
        meta = payload["meta_info"]
        found["finish"] = meta["finish_reason"]["type"]
    else:
        choice = payload["choices"][0]
        meta = choice["meta_info"]
        found["finish"] = choice["finish_reason"]
        found["meta_finish"] = meta["finish_reason"]["type"]
        found["usage_completion_tokens"] = payload["usage"]["completion_tokens"]
    found["completion_tokens"] = meta["completion_tokens"]
    return found


def exchange(base: str) -> dict[str, Any]:
    answers = {}
    with httpx.Client(base_url=base, timeout=600, trust_env=False) as client:
        for name, (route, body, _) in EXCHANGES.items():
            reply = client.post(route, json=body)
            answers[name] = digest(route, reply.status_code, reply.json())
    return answers


def record_real(out: Path) -> dict[str, Any]:
    """Launch the real server (the NGRAM CPU suite's line, its CPU environment) and record."""
    from harness import builds
    from harness.engines.sglang.launch import launch_command
    from harness.run import plan
    from harness.run.launch import Server, ServerSpec, free_port
    from harness.suite.checkpoints import resolve_models
    from harness.suite.model import load_suite

    prepared = builds.prepare(builds.parse_build_spec("sglang==0.5.23"))
    suite = load_suite(builds.REPO_ROOT / "suites" / "tiny_ngram_sglang_cpu.toml").suite
    port = free_port()
    command = launch_command(suite, prepared.python, "127.0.0.1", port, resolve_models(suite))
    spec = ServerSpec(command=command, log_path=out.with_suffix(".log"), port=port,
                      env=plan.server_env(suite, None, prepared.facts), launch_timeout_s=900)
    with Server(spec) as server:
        server.wait_ready()
        answers = exchange(spec.base_url)
    recorded = {"server": f"sglang {prepared.facts.sglang_version} on CPU, "
                          "suites/tiny_ngram_sglang_cpu.toml's launch line",
                "answers": answers}
    out.write_text(json.dumps(recorded, indent=1, sort_keys=True) + "\n")
    return recorded


if __name__ == "__main__":
    print(json.dumps(record_real(Path(sys.argv[1])), indent=1))
