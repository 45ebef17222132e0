"""Issue 31: the SGLang test double honours every field the harness sends, as the real
server does. Its answers to the recorded exchanges (tests/fake_sglang/recording.py) are
held to the real SGLang 0.5.23's recorded ones: status, finish reason and token counts
exactly, and the keys the harness reads."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.run.launch import Server, ServerSpec, free_port
from tests.fake_sglang.recording import EXCHANGES, exchange

ROOT = Path(__file__).resolve().parents[3]
FAKE = ROOT / "tests" / "fake_sglang"
RECORDED = json.loads((FAKE / "recorded-0.5.23.json").read_text())["answers"]


@pytest.fixture(scope="module")
def double(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    from harness.engines.sglang.launch import launch_command
    from harness.suite.checkpoints import resolve_models
    from harness.suite.model import load_suite
    from tests.audit.conftest import wheel_for

    wheel_for("0.5.23")
    suite = load_suite(ROOT / "suites" / "tiny_ngram_sglang_cpu.toml").suite
    port = free_port()
    command = launch_command(suite, sys.executable, "127.0.0.1", port, resolve_models(suite))
    spec = ServerSpec(command=command, port=port, launch_timeout_s=60,
                      log_path=tmp_path_factory.mktemp("double") / "server.log",
                      env={"PYTHONPATH": os.pathsep.join([str(FAKE), str(ROOT)])})
    with Server(spec) as server:
        server.wait_ready()
        yield spec.base_url


@pytest.fixture(scope="module")
def answers(double: str) -> dict[str, Any]:
    return exchange(double)


def test_the_recording_covers_each_field_the_harness_sends() -> None:
    from harness.engines.sglang import ADAPTER

    sent = ADAPTER.chat_body([{"role": "user", "content": "x"}],
                             {"max_new_tokens": 1, "temperature": 0.6, "top_p": 0.9,
                              "top_k": 5, "stop": ["Q:"], "sampling_seed": 3}, "r", {"a": 1})
    recorded = set().union(*(body for _, body, _ in EXCHANGES.values()))
    # every field but the stop list and template options, which the tiny answers never reach
    assert set(sent) - recorded <= {"stop", "chat_template_kwargs"}
    assert RECORDED.keys() == EXCHANGES.keys()


@pytest.mark.parametrize("name", list(EXCHANGES))
def test_the_double_answers_as_the_real_server_did(name: str, answers: dict[str, Any]) -> None:
    real, mine = RECORDED[name], answers[name]
    limit = EXCHANGES[name][2]
    # the real server: every one of these ran to its token limit
    assert real["finish"] == "length" and real["completion_tokens"] == limit
    figures = {k: v for k, v in real.items() if k != "shape"}
    assert {k: v for k, v in mine.items() if k != "shape"} == figures
    assert mine["shape"].keys() == real["shape"].keys()
    if "choices" in real["shape"]:
        assert mine["shape"]["choices"][0].keys() == real["shape"]["choices"][0].keys()
        assert mine["shape"]["usage"].keys() <= real["shape"]["usage"].keys()


def test_max_completion_tokens_is_read_by_sglangs_own_rule() -> None:
    """The double's chat rule is SGLang 0.5.23's `to_sampling_params`, from its wheel."""
    import importlib.util

    from tests.audit.conftest import wheel_for

    # the double's module, by its file (no `sglang` package left behind in this process)
    spec = importlib.util.spec_from_file_location(
        "fake_sglang_launch_server", FAKE / "sglang" / "launch_server.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    chat_sampling_params = module.chat_sampling_params

    wheel_for("0.5.23")
    params = chat_sampling_params("0.5.23")
    assert params({"max_completion_tokens": 32, "max_tokens": 50})["max_new_tokens"] == 32
    assert params({"max_tokens": 50})["max_new_tokens"] == 50
    assert params({})["max_new_tokens"] is None
    read = params({"messages": [], "stop": "Q:", "seed": 9, "temperature": 0.6})
    assert read["stop"] == ["Q:"] and read["sampling_seed"] == 9
    assert (read["temperature"], read["top_p"], read["top_k"]) == (0.6, 1.0, -1)
