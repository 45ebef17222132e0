"""Causality policies, the draft-noise knob, and fidelity to dflash's own generate loop."""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from harness.engines.sglang.api import parse_generate as parse_generate_response
from harness.suite.attention import resolve_layers
from tests.reference_engine.conftest import STOP, Server, start_server, stop_server

pytestmark = pytest.mark.slow

# From sglang-facts.md, for a draft of 4 sliding + 1 full layers without is_causal.
EXPECTED_CAUSAL = {
    "fixed": [True, True, True, True, False],
    "legacy": [True, True, True, True, False],
    "regressed": [False, False, False, False, False],
}


# Three servers, started at once: "legacy" also carries the smaller draft noise. For this
# draft legacy builds the same layers as fixed (EXPECTED_CAUSAL, checked below from the
# server itself), so the noise test's "0.3" differs from the clean server by the noise
# alone; the policy test reads only the layer table, which noise does not touch.
SERVER_ARGS = {
    "legacy": ("--attention-policy", "legacy", "--draft-noise", "0.3", "--seed", "3"),
    "regressed": ("--attention-policy", "regressed"),
    "0.7": ("--draft-noise", "0.7", "--seed", "3"),
}


@pytest.fixture(scope="module")
def servers(checkpoints: tuple[Path, Path]) -> Iterator[dict[str, Server]]:
    with ThreadPoolExecutor(max_workers=len(SERVER_ARGS)) as pool:
        launches = {name: pool.submit(start_server, *checkpoints, *args, "--workers", "1")
                    for name, args in SERVER_ARGS.items()}
    started = {name: launch.result() for name, launch in launches.items()
               if launch.exception() is None}
    try:
        for launch in launches.values():
            launch.result()  # the first failed start fails the module, the rest stopped
        yield {**started, "0.3": started["legacy"]}
    finally:
        for running in started.values():
            stop_server(running)


def test_draft_declares_the_regressed_case(checkpoints: tuple[Path, Path]) -> None:
    config = json.loads((checkpoints[1] / "config.json").read_text())
    assert "is_causal" not in config
    assert config["layer_types"] == ["sliding_attention"] * 4 + ["full_attention"]
    assert config["block_size"] > 4 and config["sliding_window"] < 64


@pytest.mark.parametrize("policy", ["fixed", "legacy", "regressed"])
def test_policy_table_is_applied(policy: str, server: Server, servers: dict[str, Server],
                                 checkpoints: tuple[Path, Path]) -> None:
    running = server if policy == "fixed" else servers[policy]
    info = running.call("/server_info")[1]
    assert info["attention_policy"] == policy
    table = info["attention_layers"]
    assert [layer["causal"] for layer in table] == EXPECTED_CAUSAL[policy]
    config = json.loads((checkpoints[1] / "config.json").read_text())
    assert table == [entry.to_dict() for entry in resolve_layers(config, policy)]
    # What the modules actually do, read back after loading.
    applied = info["attention_applied"]
    assert [(a["causal"], a["window"]) for a in applied] == [
        (t["causal"], t["window"]) for t in table]


def exact_accept_length(running: Server, prompts: list[str]) -> tuple[float, list[str]]:
    parsed = [parse_generate_response(running.generate(p, max_new_tokens=64, stop=STOP))
              for p in prompts]
    tokens = sum(p.completion_tokens for p in parsed)
    return tokens / sum(p.verify_steps for p in parsed), [p.text for p in parsed]


def test_noise_lowers_accept_length_monotonically(server: Server, servers: dict[str, Server],
                                                  prompts: list[str]) -> None:
    clean, clean_texts = exact_accept_length(server, prompts[:6])
    some, some_texts = exact_accept_length(servers["0.3"], prompts[:6])
    much, much_texts = exact_accept_length(servers["0.7"], prompts[:6])
    assert clean > some > much >= 1.0
    # Greedy outputs are the target's: noise changes only how fast they are found.
    assert clean_texts == some_texts == much_texts


def test_policies_keep_greedy_outputs(server: Server, servers: dict[str, Server],
                                      prompts: list[str]) -> None:
    fixed = exact_accept_length(server, prompts[:3])[1]
    assert exact_accept_length(servers["regressed"], prompts[:3])[1] == fixed


@pytest.fixture(scope="module")
def decoder(checkpoints: tuple[Path, Path]) -> Any:
    """The decoding loop in this process (torch imported here: e2e tests only)."""
    pytest.importorskip("torch")
    from reference_engine.loading import Options, load_decoder

    target, draft = checkpoints
    return load_decoder(Options(target=str(target), draft=str(draft)))[0]


@pytest.mark.e2e  # minutes of two decoding loops: nox -s e2e
def test_loop_matches_dflash_generate(decoder: Any, prompts: list[str],
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Without noise, our loop reproduces dflash_generate's ids and per-step acceptance."""
    import time

    import torch
    from dflash import model as dflash_model

    # dflash's stats timer calls torch.cuda.synchronize(); a CPU clock is all we need.
    monkeypatch.setattr(dflash_model, "_cuda_time", time.perf_counter)
    for prompt in prompts[:3]:
        ours = decoder.generate(prompt, max_new_tokens=40)
        ids = torch.tensor([decoder.tokenizer(prompt)["input_ids"]])
        theirs = dflash_model.dflash_generate(decoder.draft, decoder.target, ids, 40, None,
                                              return_stats=True)
        assert ours.output_ids == theirs.output_ids[0, ids.shape[1]:].tolist()
        assert [a + 1 for a in ours.accepted_drafts][:-1] == theirs.acceptance_lengths[:-1]
        assert ours.verify_steps == len(theirs.acceptance_lengths)


@pytest.mark.e2e
def test_paced_forwards_take_their_time_and_decide_nothing(
        decoder: Any, prompts: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """REFERENCE_TARGET_FORWARD_S (reference_engine/pacing.py): every target forward takes
    at least that long, and the tokens and the accepted drafts per step stay the same."""
    import time

    plain = decoder.generate(prompts[0], max_new_tokens=48)
    monkeypatch.setattr(decoder, "target_forward_s", 0.02)
    started = time.perf_counter()
    paced = decoder.generate(prompts[0], max_new_tokens=48)
    took = time.perf_counter() - started
    assert (paced.output_ids, paced.accepted_drafts) == (plain.output_ids,
                                                         plain.accepted_drafts)
    forwards = 1 + len(paced.accepted_drafts)  # the prefill, then one per verify step
    assert forwards >= 3 and took >= 0.02 * forwards
