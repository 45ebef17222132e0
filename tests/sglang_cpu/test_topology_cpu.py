"""Topologies on the real SGLang 0.5.23 on CPU (`nox -s sglang_cpu`).

- DP = 2 (`tiny_ngram_dp2_sglang_cpu`), its server started as a user starts it: from the
  line `harness run --dry-run` prints (the harness's own launch line and environment),
  pasted into a shell, then measured by `harness run --server URL` (nothing launched or
  stopped). Every request names its rank, each rank's figures over its own requests add up
  exactly to the pooled ones, and each equals the server's own figure for that rank (its
  `/server_info` internal_states entry). One real DP2 server for both: the harness
  launching a multi-rank tree itself is held here by the two-node case below, and with
  per-rank figures on the reference engine (tests/run/schedulers/test_slurm_cluster.py).
- Two nodes on this host through SGLang's own `--nnodes 2 --dist-init-addr 127.0.0.1:P`
  (TP 2, one rank per node): it serves on CPU; each node gets a port of its own (SGLang
  starts a health server on every node, `entrypoints/engine.py`
  launch_dummy_health_check_server), and both process trees are gone after.
- What the release's own parser and resolution refuse, before any server starts: exit 2
  naming SGLang's message and the line of its code (DP attention with NGRAM).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from harness.engines.sglang import release_check
from harness.run.launch import free_port, kill_tree
from tests.fixtures.pasted_line import wait_serving
from tests.sglang_cpu.conftest import REPO, SPEC

SUITE = "tiny_ngram_dp2_sglang_cpu"


def harness_run(*args: str, results: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness", "run", *args, "--results",
                           str(results), "--no-progress", "--no-plot"], cwd=REPO,
                          capture_output=True, text=True, timeout=2400,
                          env=dict(os.environ), check=False)


def check_ranks(record: dict[str, Any]) -> None:
    measurement = record["measurement"]
    ranks = measurement["per_rank"]
    assert [rank["rank"] for rank in ranks] == [0, 1]
    for key in ("n_requests", "verify_steps", "completion_tokens", "correct_drafts"):
        assert sum(rank[key] for rank in ranks) == measurement[key], key
    for rank in ranks:  # each rank's own counters over the flushed window
        assert rank["server_reported_accept_length"] == pytest.approx(
            rank["accept_length_server_avg"], abs=1e-9), rank
        exact = (rank["correct_drafts"] + rank["verify_steps"]) / rank["verify_steps"]
        assert rank["accept_length_server_avg"] == pytest.approx(exact, abs=1e-12)
    pooled = sum(rank["accept_length_server_avg"] * rank["verify_steps"] for rank in ranks)
    assert pooled / measurement["verify_steps"] == pytest.approx(
        measurement["accept_length_server_avg"], abs=1e-12)
    assert measurement["server_reported_accept_length"] == pytest.approx(
        measurement["accept_length_server_avg"], abs=1e-9)
    print(json.dumps({"pooled": measurement["accept_length_server_avg"],
                      "ranks": [(r["rank"], r["n_requests"], r["verify_steps"],
                                 r["accept_length_server_avg"],
                                 r["server_reported_accept_length"]) for r in ranks],
                      "match": measurement["server_rank_match"]}))


def test_a_pasted_dry_run_line_serves_and_is_measured_by_attaching(sglang_cpu: Any,
                                                                   tmp_path: Path) -> None:
    """The suite's server started as a user starts it: `harness run --dry-run` prints the
    launch line with its environment (SGLANG_USE_CPU_ENGINE=1, the kernel stand-in on
    PYTHONPATH), pasted into a shell. It serves, and `harness run --server` measures it:
    the harness starts and stops nothing."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    dry = subprocess.run([sys.executable, "-m", "harness", "run", SUITE, "--sglang", SPEC,
                          "--dry-run"], cwd=REPO, capture_output=True, text=True,
                         timeout=300, check=True, env={**env, "PYTHONPATH": str(REPO)})
    [line] = [line.removeprefix("launch     server: ") for line in dry.stdout.splitlines()
              if line.startswith("launch     ")]
    assert "SGLANG_USE_CPU_ENGINE=1" in line and "cpu_stand_ins" in line
    assert "--dp-size 2" in line
    port = free_port()
    log = tmp_path / "user-server.log"
    with log.open("wb") as out:
        server = subprocess.Popen(["bash", "-c", "exec " + line.replace(
            "--port 30000", f"--port {port}")], cwd=REPO, env=env, stdout=out,
            stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_serving(server, port, within_s=900, every_s=0.5, log=log)
        done = harness_run(SUITE, "--server", url, results=tmp_path / "r")
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        assert server.poll() is None  # still running: attaching stops nothing
        assert httpx.get(url + "/health", timeout=30).status_code == 200
    finally:
        kill_tree(server.pid)
    [path] = list((tmp_path / "r").glob("runs/*/*/run.json"))
    record = json.loads(path.read_text())
    assert record["launch"]["launcher"] == "attached"
    assert record["build"]["version"] == "0.5.23"  # as the server reports it
    check_ranks(record)
    rows = [json.loads(line) for line in (path.parent / "requests.jsonl").open()]
    assert {row["dp_rank"] for row in rows} == {0, 1}  # every request names its rank


def test_two_nodes_on_this_host_serve_through_sglangs_own_launch(sglang_cpu: Any,
                                                                tmp_path: Path) -> None:
    import psutil

    text = (REPO / "suites" / f"{SUITE}.toml").read_text().replace(
        "dp_size = 2\n", "tp_size = 2\nnnodes = 2\n").replace(
        "questions = 12", "questions = 4").replace("accept_length = 1.2", "accept_length = 1.0")
    path = tmp_path / "nodes.toml"
    path.write_text(text)
    done = harness_run(str(path), "--sglang", SPEC, results=tmp_path / "r")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    [run_json] = list((tmp_path / "r").glob("runs/*/*/run.json"))
    record = json.loads(run_json.read_text())
    nodes = record["launch"]["node_commands"]
    assert list(nodes) == ["server", "node 1"]
    for rank, line in enumerate(nodes.values()):
        assert line[line.index("--node-rank") + 1] == str(rank)
        assert line[line.index("--nnodes") + 1] == "2"
    assert nodes["server"][nodes["server"].index("--port") + 1] != \
        nodes["node 1"][nodes["node 1"].index("--port") + 1]
    measurement = record["measurement"]
    assert measurement["server_reported_accept_length"] == pytest.approx(
        measurement["accept_length_server_avg"], abs=1e-9)
    assert (run_json.parent / "server-node-1.log").stat().st_size > 0
    ports = {line[line.index("--port") + 1] for line in nodes.values()}
    leftover = [p.pid for p in psutil.process_iter(["cmdline"])
                if any(f"--port {port} " in " ".join(p.info["cmdline"] or []) + " "
                       for port in ports)]
    assert not leftover  # every node's tree stopped


def test_the_release_refuses_dp_attention_with_ngram_before_any_launch(
        sglang_cpu: Any, tmp_path: Path) -> None:
    text = (REPO / "suites" / f"{SUITE}.toml").read_text().replace(
        "dp_size = 2\n", "tp_size = 2\ndp_size = 2\ndp_attention = true\n")
    path = tmp_path / "attention.toml"
    path.write_text(text)
    done = harness_run(str(path), "--sglang", SPEC, results=tmp_path / "r")
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    said = done.stdout + done.stderr
    assert "refuses the topology" in said
    assert "ngram speculative decoding does not support dp attention" in said
    assert "speculative_hook.py" in said and "_handle_ngram" in said
    assert not list((tmp_path / "r").glob("runs/*/*/server.log")) or all(
        p.stat().st_size == 0 for p in (tmp_path / "r").glob("runs/*/*/server.log"))


def test_the_probe_names_sglangs_own_refusals(sglang_cpu: Any) -> None:
    """SGLang 0.5.23's parser and resolution over topology lines, in its own interpreter."""
    from harness.run.plan import server_env
    from harness.suite.model import load_suite

    env = server_env(load_suite(SUITE).suite, None, sglang_cpu.facts)
    base = ["--model-path", str(REPO / "reference_engine/tiny/target"),
            "--speculative-algorithm", "NGRAM", "--speculative-num-draft-tokens", "4",
            "--device", "cpu", "--attention-backend", "intel_amx"]
    lines = {"dp2": ["--dp-size", "2"],
             "attention_tp1": ["--tp-size", "1", "--dp-size", "2", "--enable-dp-attention"],
             "nodes": ["--tp-size", "2", "--nnodes", "2", "--node-rank", "1",
                       "--dist-init-addr", "127.0.0.1:5000"],
             "prefill_fake": ["--disaggregation-mode", "prefill",
                              "--disaggregation-transfer-backend", "fake"]}
    answers = dict(zip(lines, release_check.probe(sglang_cpu.python,
                                                  [base + extra for extra in lines.values()],
                                                  env), strict=True))
    print(json.dumps(answers, indent=1))
    assert answers["dp2"]["ok"] and answers["dp2"]["resolved"]["dp_size"] == 2
    assert answers["nodes"]["ok"] and answers["nodes"]["resolved"]["nnodes"] == 2
    refused = answers["attention_tp1"]
    assert refused["where"]["function"] == "handle_data_parallelism"
    assert "parallel_hook.py" in refused["where"]["file"]
    assert "fake" in answers["prefill_fake"]["refused"]
    assert answers["prefill_fake"]["where"]["function"] == "handle_pd_disaggregation"
