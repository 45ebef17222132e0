"""The run plan: server settings cross-check and the server environment."""

from __future__ import annotations

from harness.plan import server_env, server_mismatches
from harness.preflight import Fit
from harness.suite import load_suite


def test_server_settings_match_the_suite() -> None:
    suite = load_suite("gemma4_dflash_31b").suite
    info = {"speculative_algorithm": "DFLASH", "speculative_num_draft_tokens": 16}
    assert server_mismatches(info, suite) == []


def test_server_running_other_settings_is_named() -> None:
    suite = load_suite("gemma4_dflash_31b").suite
    info = {"speculative_algorithm": "EAGLE", "speculative_num_draft_tokens": 8}
    problems = server_mismatches(info, suite)
    assert len(problems) == 2
    assert "speculative_num_draft_tokens is 8, the suite declares 16" in problems[1]


def test_non_object_server_info_is_a_problem() -> None:
    suite = load_suite("gemma4_dflash_31b").suite
    assert server_mismatches(None, suite) == ["/server_info did not answer with a JSON object"]


def test_devices_reach_the_server_environment() -> None:
    suite = load_suite("gemma4_dflash_31b").suite
    assert server_env(suite, Fit(True, "", (2, 3)))["CUDA_VISIBLE_DEVICES"] == "2,3"
    assert "CUDA_VISIBLE_DEVICES" not in server_env(suite, Fit(True, "needs no GPU"))
