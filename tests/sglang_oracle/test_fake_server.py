"""The SGLang test double (tests/fake_sglang) over HTTP: SGLang's figures, under real load."""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest

from harness.audit.source import cached_archive, wheel_cache_dir

from .test_accept_length import STOP, server_avg

REPO = Path(__file__).resolve().parents[2]
FAKE = REPO / "tests" / "fake_sglang"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def kill_tree(process: subprocess.Popen[bytes]) -> None:
    try:
        family = [psutil.Process(process.pid), *psutil.Process(process.pid).children(True)]
    except psutil.NoSuchProcess:
        return
    for member in family:
        member.kill()
    psutil.wait_procs(family, timeout=10)


@pytest.fixture
def fake_server(tmp_path: Path) -> Iterator[Callable[..., str]]:
    """Start the double with extra flags and env; returns its base URL once ready."""
    started: list[subprocess.Popen[bytes]] = []

    def start(*flags: str, version: str = "0.5.23", **env: str) -> str:
        if cached_archive(version, wheel_cache_dir()) is None:
            pytest.skip(f"no sglang {version} wheel in {wheel_cache_dir()}")
        port = free_port()
        environ = {**os.environ, **env, "FAKE_SGLANG_VERSION": version,
                   "PYTHONPATH": os.pathsep.join([str(FAKE), str(REPO),
                                                  os.environ.get("PYTHONPATH", "")])}
        log = (tmp_path / f"server-{port}.log").open("wb")
        command = [sys.executable, "-m", "sglang.launch_server", "--model-path", "t",
                   "--speculative-algorithm", "DFLASH", "--speculative-draft-model-path", "d",
                   "--speculative-num-draft-tokens", "16", "--port", str(port), *flags]
        started.append(subprocess.Popen(command, env=environ, stdout=log, stderr=log))
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert started[-1].poll() is None, (tmp_path / f"server-{port}.log").read_text()
            try:
                if httpx.get(url + "/health_generate", timeout=2).status_code == 200:
                    return url
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        raise AssertionError("the fake server never became ready")

    yield start
    for process in started:
        kill_tree(process)


def generate_all(url: str, count: int, concurrency: int) -> list[dict[str, Any]]:
    """`count` requests, `concurrency` at once, each on its own connection."""
    host, port = url.removeprefix("http://").split(":")

    def one(i: int) -> dict[str, Any]:
        body = {"text": f"Question: synthetic {i}\nAnswer:", "rid": f"q{i}",
                "sampling_params": {"max_new_tokens": 40 if i % 7 == 0 else 512,
                                    "stop": list(STOP), "temperature": 0}}
        connection = http.client.HTTPConnection(host, int(port), timeout=60)
        try:
            connection.request("POST", "/generate", json.dumps(body),
                               {"Content-Type": "application/json"})
            response = connection.getresponse()
            payload = response.read()
        finally:
            connection.close()
        assert response.status == 200, payload
        return json.loads(payload)["meta_info"]

    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        return list(pool.map(one, range(count)))


def server_figure(url: str) -> float | None:
    return httpx.get(url + "/server_info", timeout=10).json()["internal_states"][0].get(
        "avg_spec_accept_length")


def test_128_concurrent_requests_are_all_answered(fake_server: Callable[..., str]) -> None:
    url = fake_server()
    metas = generate_all(url, 256, concurrency=128)
    assert len(metas) == 256 and all(meta["spec_verify_ct"] > 0 for meta in metas)


def test_server_figure_is_sglang_average_of_the_answers(
        fake_server: Callable[..., str]) -> None:
    # Folded every iteration, no overlap overshoot: SGLang's figure is exactly server_avg.
    url = fake_server("--decode-log-interval", "1", "--disable-overlap-schedule")
    generate_all(url, 8, concurrency=4)  # warm-up
    assert httpx.post(url + "/flush_cache", timeout=10).status_code == 200
    assert server_figure(url) is None
    metas = generate_all(url, 128, concurrency=128)
    assert server_figure(url) == pytest.approx(server_avg(metas), rel=1e-12)


def test_default_interval_leaves_a_short_run_unreported(
        fake_server: Callable[..., str]) -> None:
    url = fake_server(version="0.5.17")
    metas = generate_all(url, 2, concurrency=2)  # under 40 decode iterations: none folded
    assert server_figure(url) is None
    assert all(meta["spec_accepted_drafts"] == meta["spec_num_correct_drafts"] for meta in metas)
