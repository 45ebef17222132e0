"""Measure the reference engine's accept length per policy and noise setting, over HTTP.

`python -m harness.engines.reference.measure --checkpoints DIR [--prompts 30]` starts one
server per setting (the real process, as a suite would), sends GSM8K test questions in
the harness's prompt format (SGLang run_eval gsm8k: shots, then `Question: q\nAnswer:`),
and prints a Markdown table: exact accept length (sum of completion tokens over sum of
verify steps), per-prompt spread, and wall times. Stdlib only, so it runs in any env; the
servers run with `--python` (default: this interpreter). Used for docs/reference-engine.md.
"""

from __future__ import annotations

import argparse
import json
import random
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

GSM8K = Path("/work/shared/data/gsm8k/test.jsonl")
STOP = ["Question", "Assistant:", "<|separator|>"]


def gsm8k_prompts(path: Path, count: int, shots: int) -> list[str]:
    """SGLang GSM8KEval layout: the first 5 lines are shots, the questions follow."""
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    prefix = "".join(f"Question: {row['question']}\nAnswer: {row['answer']}\n\n"
                     for row in rows[:shots])
    return [f"{prefix}Question: {row['question']}\nAnswer:" for row in rows[5 : 5 + count]]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def request(url: str, body: dict | None = None, timeout: float = 120.0) -> dict | str:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as response:
        raw = response.read().decode()
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw


def start_server(python: str, checkpoints: Path, port: int, extra: list[str]) -> subprocess.Popen:
    command = [python, "-m", "harness.engines.reference", "--target", str(checkpoints / "target"),
               "--draft", str(checkpoints / "draft"), "--host", "127.0.0.1", "--port", str(port),
               "--log-level", "warning", *extra]
    return subprocess.Popen(command)


def wait_ready(base: str, process: subprocess.Popen, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode}")
        try:
            request(f"{base}/health_generate", timeout=30)
            return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError("server not ready in time")


def bootstrap_ci(tokens: list[int], steps: list[int], resamples: int = 2000,
                 seed: int = 0) -> tuple[float, float]:
    """95% percentile interval of Σtokens/Σsteps, resampling prompts (the unit of sampling)."""
    rng = random.Random(seed)
    count = len(tokens)
    ratios = []
    for _ in range(resamples):
        picks = [rng.randrange(count) for _ in range(count)]
        ratios.append(sum(tokens[i] for i in picks) / sum(steps[i] for i in picks))
    ratios.sort()
    return ratios[int(0.025 * resamples)], ratios[int(0.975 * resamples) - 1]


def measure(python: str, checkpoints: Path, prompts: list[str], extra: list[str],
            max_new_tokens: int) -> dict:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    started = time.perf_counter()
    process = start_server(python, checkpoints, port, extra)
    try:
        wait_ready(base, process)
        startup = time.perf_counter() - started
        request(f"{base}/flush_cache", {})
        run_started = time.perf_counter()
        metas = [request(f"{base}/generate", {
            "text": prompt, "sampling_params": {"max_new_tokens": max_new_tokens,
                                                "temperature": 0, "stop": STOP}})["meta_info"]
            for prompt in prompts]
        elapsed = time.perf_counter() - run_started
        server = request(f"{base}/server_info")["internal_states"][0]
    finally:
        process.terminate()
        process.wait(timeout=30)
    spec = [meta for meta in metas if meta.get("spec_verify_ct")]
    per_prompt = [meta["spec_accept_length"] for meta in spec]
    token_list = [meta["completion_tokens"] for meta in spec]
    step_list = [meta["spec_verify_ct"] for meta in spec]
    tokens, steps = sum(token_list), sum(step_list)
    return {"accept_length": tokens / steps, "server": server.get("avg_spec_accept_length"),
            "ci": bootstrap_ci(token_list, step_list),
            "min": min(per_prompt), "max": max(per_prompt),
            "stdev": statistics.stdev(per_prompt), "startup_s": startup, "run_s": elapsed,
            "tokens": tokens}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoints", type=Path, required=True)
    parser.add_argument("--prompts", type=int, default=30)
    parser.add_argument("--shots", type=int, default=1)
    parser.add_argument("--max-new-tokens", type=int, default=96)
    parser.add_argument("--noise", type=float, nargs="*", default=[0.0, 0.1, 0.25, 0.5])
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--data", type=Path, default=GSM8K)
    args = parser.parse_args(argv)
    prompts = gsm8k_prompts(args.data, args.prompts, args.shots)
    settings = [(policy, 0.0) for policy in ("fixed", "legacy", "regressed")]
    settings += [("fixed", noise) for noise in args.noise if noise > 0]
    print("| policy | draft noise | accept length | 95% CI | server avg "
          "| per-prompt min / max / sd | completion tokens | startup s | run s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for policy, noise in settings:
        extra = ["--attention-policy", policy, "--draft-noise", str(noise)]
        row = measure(args.python, args.checkpoints, prompts, extra, args.max_new_tokens)
        low, high = row["ci"]
        print(f"| {policy} | {noise} | {row['accept_length']:.4f} | {low:.2f}-{high:.2f} | "
              f"{row['server']:.4f} | "
              f"{row['min']:.2f} / {row['max']:.2f} / {row['stdev']:.2f} | {row['tokens']} | "
              f"{row['startup_s']:.1f} | {row['run_s']:.1f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
