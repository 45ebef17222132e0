"""`harness run SUITE --server URL`: a deployment someone else started, measured as a
launched one (per-rank figures included), its build read from the server, never started or
stopped by the harness; a server that is not the suite's is refused naming the field."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from harness.errors import BadInput
from harness.run.attach import AttachedServer, server_url
from harness.run.launch import free_port

ROOT = Path(__file__).resolve().parents[2]
TINY = (ROOT / "suites" / "tiny_dflash_cpu.toml").read_text()


def suite(folder: Path, name: str, topology: str = "", block: int = 8) -> Path:
    text = TINY.replace('name = "tiny_dflash_cpu"', f'name = "{name}"').replace(
        "questions = 100", "questions = 20").replace(
        "[topology]\ngpus = 0\n", f"[topology]\ngpus = 0\n{topology}\n").replace(
        "block_size = 8", f"block_size = {block}")
    path = folder / f"{name}.toml"
    path.write_text(text)
    return path


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness", "run", *args, "--no-progress",
                           "--no-plot"], capture_output=True, text=True, timeout=900,
                          check=False, env=dict(os.environ))


@pytest.fixture(scope="module")
def dp2_server() -> Iterator[str]:
    from tests.reference_engine.conftest import engine_available, start_server, stop_server

    if not engine_available():
        pytest.skip("the reference extra (torch, transformers, dflash) is not installed")
    from harness.builds import cache_root
    from reference_engine.checkpoints import ensure_checkpoints

    target, draft = ensure_checkpoints(sys.executable, cache_root())
    server = start_server(target, draft, "--dp-size", "2", "--block-size", "8", "--workers",
                          "1")
    os.environ["HARNESS_TEST_TINY_DRAFT"] = str(draft)
    yield server.base
    stop_server(server)


def test_an_attached_server_is_measured_per_rank_and_left_running(dp2_server: str,
                                                                  tmp_path: Path) -> None:
    done = run(str(suite(tmp_path, "attach_dp2", "dp_size = 2")), "--server", dp2_server,
               "--results", str(tmp_path / "r"))
    assert done.returncode == 0, done.stdout + done.stderr
    [path] = list((tmp_path / "r").glob("runs/*/*/run.json"))
    record = json.loads(path.read_text())
    assert record["launch"]["launcher"] == "attached" and record["launch"]["command"] == []
    assert record["build"]["method"] == "attached"
    assert record["build"]["version"] == "0.5.23+reference"  # what the server reports
    assert record["build"]["options"]["served"]["dp_ranks"] == 2
    assert "/get_model_info" in record["provenance"]["server"]
    measurement = record["measurement"]
    ranks = measurement["per_rank"]
    assert sum(r["verify_steps"] for r in ranks) == measurement["verify_steps"]
    for rank in ranks:
        assert rank["server_reported_accept_length"] == pytest.approx(
            rank["accept_length_server_avg"], rel=1e-12)
    assert "DP rank 0:" in done.stdout and "DP rank 1:" in done.stdout
    # every request streamed from the attached server, its rank kept: latency recorded
    rows = [json.loads(line) for line in (path.parent / "requests.jsonl").read_text().split("\n")
            if line.strip()]
    assert rows and all(row["timing"]["streamed"] and row["timing"]["chunk_s"] for row in rows)
    assert {row["dp_rank"] for row in rows} == {0, 1}
    assert measurement["latency"]["n_timed"] == len(rows)
    assert httpx.get(dp2_server + "/health", timeout=10).status_code == 200  # not stopped


@pytest.mark.parametrize(("topology", "block", "extra", "field"), [
    ("", 8, (), "topology.dp_size (DP ranks): the server runs 2, the suite declares 1"),
    ("dp_size = 2", 6, (), "speculative_num_draft_tokens is 8, the suite declares 6"),
    ("dp_size = 2", 8, ("--target-model", "org/other-model", "--draft-model", "DRAFT"),
     "model: the server serves"),
])
def test_a_server_that_is_not_the_suites_is_refused_naming_the_field(
        dp2_server: str, tmp_path: Path, topology: str, block: int, extra: tuple[str, ...],
        field: str) -> None:
    extra = tuple(os.environ["HARNESS_TEST_TINY_DRAFT"] if arg == "DRAFT" else arg
                  for arg in extra)
    done = run(str(suite(tmp_path, "attach_other", topology, block)), "--server", dp2_server,
               "--results", str(tmp_path / "r"), *extra)
    assert done.returncode == 2, done.stdout + done.stderr
    assert field in done.stderr and "Traceback" not in done.stderr
    assert httpx.get(dp2_server + "/health", timeout=10).status_code == 200


def test_nothing_listening_is_an_engine_error(tmp_path: Path) -> None:
    done = run("tiny_dflash_cpu", "--server", f"http://127.0.0.1:{free_port()}",
               "--results", str(tmp_path / "r"))
    assert done.returncode == 3, done.stdout + done.stderr
    assert "does not answer /server_info" in done.stdout


@pytest.mark.parametrize("url", ["ftp://h:1", "http://", "http://u:p@h:1", "http://h:1/v1",
                                 "h:1", "http://h:1/?x=1"])
def test_a_malformed_server_url_is_bad_input(url: str) -> None:
    with pytest.raises(BadInput):
        server_url(url)


def test_server_goes_with_no_build_to_launch() -> None:
    done = run("tiny_dflash_cpu", "--server", "http://127.0.0.1:1", "--sglang",
               "reference:noise=0")
    assert done.returncode == 2 and "--sglang/--build" in done.stderr


def test_a_deployment_that_stops_answering_is_dead_within_seconds(tmp_path: Path) -> None:
    started = time.monotonic()
    with AttachedServer(f"http://127.0.0.1:{free_port()}", "/health", {},
                        tmp_path / "server.log") as server:
        while server.death() is None and time.monotonic() - started < 30:
            time.sleep(0.2)
        assert server.death() is not None and "stopped answering" in str(server.death())
    assert time.monotonic() - started < 15
