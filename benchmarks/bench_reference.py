"""Reference engine throughput under concurrency: speed-up at 4 and 16 concurrent requests.

Starts the engine on the shipped checkpoints (default workers: usable cores, at most 4),
sends the same GSM8K prompts (0-shot, greedy, max 64 tokens, SGLang's stop strings) one at
a time and then 4 and 16 at a time, and prints the wall time, throughput and speed-up of
each. Goal: speed-up >= 0.7 x min(concurrency, workers), i.e. the workers decode in
parallel (one worker per core; a shared machine gets less). Outputs must be identical in
every run (each request's arithmetic is one-request arithmetic, see worker.py).

    python benchmarks/bench_reference.py [--prompts 32] [--workers N]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from harness.run.launch import Server, ServerSpec, free_port
from harness.suite.model import GSM8KWorkload
from harness.workloads.gsm8k import STOP_STRINGS, build_prompts, load_gsm8k
from reference_engine.checkpoints import ensure_checkpoints

GOAL_EFFICIENCY = 0.7


def run(base: str, prompts: list[str], concurrency: int) -> tuple[float, list, int]:
    def one(prompt: str) -> dict:
        reply = httpx.post(base + "/generate", timeout=600, json={
            "text": prompt, "sampling_params": {"max_new_tokens": 64, "temperature": 0,
                                                "stop": list(STOP_STRINGS)}})
        reply.raise_for_status()
        return reply.json()

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        replies = list(pool.map(one, prompts))
    elapsed = time.perf_counter() - started
    tokens = sum(r["meta_info"]["completion_tokens"] for r in replies)
    return elapsed, [r["output_ids"] for r in replies], tokens


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=32)
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--checkpoints", type=Path, default=None,
                        help="a folder with target/ and draft/ (default: the shipped ones)")
    args = parser.parse_args()
    target, draft = ((args.checkpoints / "target", args.checkpoints / "draft")
                     if args.checkpoints else ensure_checkpoints())
    prompts = [p.text for p in build_prompts(load_gsm8k(), GSM8KWorkload(
        shots=0, questions=args.prompts))]
    port = free_port()
    command = [sys.executable, "-m", "reference_engine", "--target", str(target),
               "--draft", str(draft), "--port", str(port), "--log-level", "warning"]
    if args.workers:
        command += ["--workers", str(args.workers)]
    with tempfile.TemporaryDirectory() as tmp, Server(ServerSpec(
            command=command, log_path=Path(tmp) / "server.log", port=port,
            launch_timeout_s=300)) as server:
        server.wait_ready()
        base = server.spec.base_url
        workers = httpx.get(base + "/server_info").json()["workers"]
        run(base, prompts[:2], 2)  # warm-up
        baseline, outputs, tokens = run(base, prompts, 1)
        print(f"reference engine, {len(prompts)} GSM8K prompts, {workers} workers")
        print(f"  concurrency  1: {baseline:6.2f} s  {tokens / baseline:7.1f} tok/s")
        ok = True
        for concurrency in (4, 16):
            elapsed, same, _ = run(base, prompts, concurrency)
            speedup = baseline / elapsed
            goal = GOAL_EFFICIENCY * min(concurrency, workers)
            print(f"  concurrency {concurrency:2d}: {elapsed:6.2f} s  {tokens / elapsed:7.1f} "
                  f"tok/s  speed-up {speedup:.2f}x  (goal {goal:.2f}x, ratio "
                  f"{speedup / goal:.2f})  outputs identical: {same == outputs}")
            ok = ok and same == outputs
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
