"""The run plan: server settings cross-check, the server environment, build specs that do
not apply, models with no public id, and what may be written (secrets redacted)."""

from __future__ import annotations

import pytest

from harness.engines.registry import adapter_for
from harness.errors import BadInput
from harness.run.plan import choose_build, server_env
from harness.run.preflight import Fit
from harness.run.recorded import redact_command, redacted_document
from harness.run.runner import RunOptions
from harness.secrets import REDACTED
from harness.suite.checkpoints import Models, resolve_models
from harness.suite.model import load_suite, parse_suite
from tests.fixtures.suites_and_host import secretive_suite

GEMMA = load_suite("gemma4_dflash_31b")
REPORTED = {"speculative_algorithm": "DFLASH", "speculative_num_draft_tokens": 16,
            "speculative_draft_model_path": "z-lab/gemma-4-31B-it-DFlash"}


def _mismatches(info: object, suite=GEMMA.suite) -> list[str]:
    return adapter_for("sglang").settings_mismatches(info, suite)


def test_server_settings_match_the_suite() -> None:
    assert _mismatches(REPORTED) == []
    # SGLang may report a hub id as its hub-cache snapshot folder
    snapshot = "/hf/hub/models--z-lab--gemma-4-31B-it-DFlash/snapshots/0123abc"
    assert _mismatches({**REPORTED, "speculative_draft_model_path": snapshot}) == []


def test_server_running_other_settings_is_named() -> None:
    info = {**REPORTED, "speculative_algorithm": "EAGLE", "speculative_num_draft_tokens": 8,
            "speculative_draft_model_path": "other/draft"}
    problems = _mismatches(info)
    assert len(problems) == 3
    assert "speculative_num_draft_tokens is 8, the suite declares 16" in problems[2]
    assert "speculative_draft_model_path is 'other/draft'" in problems[1]


@pytest.mark.parametrize("missing", sorted(REPORTED))
def test_unreported_setting_is_an_error(missing: str) -> None:
    info = {k: v for k, v in REPORTED.items() if k != missing}
    problems = _mismatches(info)
    assert len(problems) == 1
    assert f"/server_info does not report {missing}" in problems[0]
    assert _mismatches({**info, missing: None})  # reported as null: the same


def test_a_suite_may_opt_out_with_a_reason() -> None:
    engine = GEMMA.suite.engine.model_copy(
        update={"unreported_settings_ok": "fork without resolved args"})
    suite = GEMMA.suite.model_copy(update={"engine": engine})
    assert _mismatches({"speculative_algorithm": "DFLASH"}, suite) == []
    # a reported setting that differs is still an error
    assert _mismatches({"speculative_algorithm": "EAGLE"}, suite)


def test_non_object_server_info_is_a_problem() -> None:
    assert _mismatches(None) == ["/server_info did not answer with a JSON object"]


def test_devices_reach_the_server_environment() -> None:
    suite = GEMMA.suite
    assert server_env(suite, Fit(True, "", (2, 3)))["CUDA_VISIBLE_DEVICES"] == "2,3"
    assert "CUDA_VISIBLE_DEVICES" not in server_env(suite, Fit(True, "needs no GPU"))


def test_build_spec_must_apply_to_the_suites_engine() -> None:
    tiny = load_suite("tiny_dflash_cpu")

    def choose(loaded, spec):
        return choose_build(loaded, RunOptions(sglang=spec))

    for spec in ("sglang==0.5.23", "git+https://github.com/sgl-project/sglang@main"):
        with pytest.raises(BadInput, match="this suite runs the reference engine"):
            choose(tiny, spec)
    with pytest.raises(BadInput, match="build specs:"):  # not a spec at all: the grammar
        choose(tiny, "garbage")
    with pytest.raises(BadInput, match="is a reference-engine build"):
        choose(GEMMA, "reference:policy=regressed")
    regressed, chosen = choose(tiny, "reference:policy=regressed,noise=0.1")
    assert regressed.suite.engine.attention_policy == "regressed"  # as served
    assert regressed.suite.engine.draft_noise == 0.1
    # the suite's identity stays the file's: the build is recorded as the build
    assert (regressed.document, regressed.sha256) == (tiny.document, tiny.sha256)
    assert chosen.spec.kind == "reference"
    with pytest.raises(BadInput, match="reference:"):
        choose(tiny, "reference:colour=blue")


def test_models_from_the_environment_or_the_command_line() -> None:
    muse = load_suite("muse_glimmer_dflash_gsm8k").suite
    with pytest.raises(BadInput, match=r"\$MUSE_GLIMMER_TARGET, which is not set"):
        resolve_models(muse, environ={})
    env = {"MUSE_GLIMMER_TARGET": "/m/t", "MUSE_GLIMMER_DRAFT": "/m/d"}
    assert resolve_models(muse, environ=env) == Models("/m/t", "/m/d")
    assert resolve_models(muse, target="/x/t", draft="/x/d", environ={}) == Models("/x/t", "/x/d")
    assert resolve_models(GEMMA.suite, environ={}).draft == "z-lab/gemma-4-31B-it-DFlash"


SECRET_SUITE = secretive_suite(
    '["--api-key", "sk-PLANTED-1", "--admin-api-key=sk-PLANTED-2",\n'
    '              "--ssl-keyfile-password", "pw-PLANTED-3", "--max-total-tokens", "4096"]',
    '{ HF_TOKEN = "hf_PLANTED_4", SGLANG_LOG_LEVEL = "info" }')


def test_secrets_are_redacted_in_the_recorded_document_and_command() -> None:
    suite, document = parse_suite(SECRET_SUITE, "s.toml")
    loaded = GEMMA.model_copy(update={"suite": suite, "document": document})
    recorded = str(redacted_document(loaded))
    command = adapter_for("sglang").launch_command(suite, "python", "127.0.0.1", 1)
    shown = " ".join(redact_command(command, suite))
    for planted in ("sk-PLANTED-1", "sk-PLANTED-2", "pw-PLANTED-3", "hf_PLANTED_4"):
        assert planted not in recorded and planted not in shown
    assert planted in str(document)  # the suite itself (and the server) keep the value
    assert "sk-PLANTED-1" in command  # the server gets the real key
    assert REDACTED in shown and "4096" in shown and "info" in recorded


def test_keys_sent_as_sglang_checks_them() -> None:
    """SGLang 0.5.23 (utils/auth.py): ordinary routes need --api-key; admin routes such as
    /flush_cache need --admin-api-key when it is set, else --api-key."""
    suite, _ = parse_suite(SECRET_SUITE, "s.toml")
    adapter = adapter_for("sglang")
    assert adapter.auth_headers(suite) == {"Authorization": "Bearer sk-PLANTED-1"}
    assert adapter.auth_headers(suite, admin=True) == {"Authorization": "Bearer sk-PLANTED-2"}
    only_api = suite.model_copy(update={"engine": suite.engine.model_copy(
        update={"extra_args": ["--api-key=k1"]})})
    assert adapter.auth_headers(only_api, admin=True) == {"Authorization": "Bearer k1"}
    assert adapter.auth_headers(GEMMA.suite) == {}
