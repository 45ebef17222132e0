"""What does the harness itself cost per request? (goal: <= 5% of a real run's wall time)

Drives the SGLang test double (tests/fake_sglang), answering instantly, with the real
driver (`harness.run.drive.Driver.measure`) at the SGLang suites' concurrency (128) over a
200-question GSM8K workload, and reports:
- the requests per second the driver sustains against a server that costs nothing;
- the harness's own CPU time per request (this process only: the server's work is in
  another process);
- that overhead as a share of a real run's wall time: the tiny CPU suite's measured wall
  time (pass `--tiny-wall S`, e.g. from `nox -s tiny_dflash`), and a GPU estimate for the
  gemma suite (200 requests of about 250 tokens at concurrency 128: 2 x H100 decoding at
  about 1,500 tokens/s with DFlash, roughly 35 s; the assumption is printed).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

from harness.engines.registry import adapter_for
from harness.run.drive import Driver, Endpoint
from harness.run.launch import Server, ServerSpec, free_port
from harness.suite.model import GSM8KWorkload
from harness.workloads.items import Prompt

ROOT = Path(__file__).resolve().parent.parent
GOAL_SHARE = 0.05
QUESTIONS = 200
CONCURRENCY = 128
GEMMA_WALL_ESTIMATE_S = 35.0  # 200 x ~250 tokens at ~1,500 tokens/s (assumption)


def measure_once(prompts: list[Prompt], workload: GSM8KWorkload, base_url: str) -> tuple[
        float, float]:
    driver = Driver(Endpoint(base_url, adapter_for("sglang")), workload)
    cpu, wall = time.process_time(), time.perf_counter()
    result = asyncio.run(driver.measure(prompts))
    assert len(result.rows) == len(prompts), "every request must finish"
    return time.perf_counter() - wall, time.process_time() - cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny-wall", type=float, default=None, metavar="S",
                        help="measured wall time of a tiny-suite run (seconds)")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    os.environ["PYTHONPATH"] = str(ROOT / "tests" / "fake_sglang")
    os.environ["FAKE_SGLANG_DELAY_S"] = "0"
    workload = GSM8KWorkload(questions=QUESTIONS, concurrency=CONCURRENCY, max_tokens=512)
    prompts = [Prompt(i + 5, f"Question: {i} plus {i}?\nAnswer:", str(2 * i))
               for i in range(QUESTIONS)]
    with tempfile.TemporaryDirectory() as tmp:
        port = free_port()
        spec = ServerSpec(command=[sys.executable, "-m", "sglang.launch_server", "--model-path",
                                   "m", "--speculative-algorithm", "DFLASH",
                                   "--speculative-num-draft-tokens", "16",
                                   "--host", "127.0.0.1", "--port", str(port)],
                          log_path=Path(tmp) / "server.log", port=port, launch_timeout_s=60)
        with Server(spec) as server:
            server.wait_ready()
            trials = [measure_once(prompts, workload, spec.base_url) for _ in range(args.rounds)]
    wall, cpu = min(trials)  # the least disturbed round
    per_request_ms = cpu / QUESTIONS * 1000
    print(f"client overhead, {QUESTIONS} requests at concurrency {CONCURRENCY} against an "
          f"instant server (best of {args.rounds}):")
    print(f"  {QUESTIONS / wall:.0f} requests/s sustained; harness CPU {per_request_ms:.2f} ms "
          "per request")
    share = cpu / GEMMA_WALL_ESTIMATE_S
    print(f"  share of a gemma run (~{GEMMA_WALL_ESTIMATE_S:.0f} s, estimated): {share:.2%} "
          f"(goal <= {GOAL_SHARE:.0%}; ratio to goal {share / GOAL_SHARE:.2f})")
    if args.tiny_wall:
        tiny = cpu / 2 / args.tiny_wall  # the tiny suite sends 100 questions, not 200
        print(f"  share of a tiny-suite run ({args.tiny_wall:.1f} s measured): {tiny:.2%}")
    return 0 if share <= GOAL_SHARE else 1


if __name__ == "__main__":
    sys.exit(main())
