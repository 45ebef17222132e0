"""Fixtures for lifecycle tests against the SGLang test double in tests/fake_sglang."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

FAKE_SGLANG = Path(__file__).resolve().parent.parent / "fake_sglang"

SUITE_TEMPLATE = """
name = "{name}"
description = "lifecycle test against the SGLang test double"

[engine]
kind = "sglang"
launch_timeout_s = {timeout}
# --decode-log-interval 1 and no overlap scheduling: SGLang's own figure then equals the
# exact server_avg, so the cross-check can be asserted (tests/sglang_oracle shows why)
extra_args = ["--trust-remote-code", "--mem-fraction-static", "0.55",
              "--decode-log-interval", "1", "--disable-overlap-schedule"]

[target]
model = "google/gemma-4-31B-it"

[draft]
model = "z-lab/gemma-4-31B-it-DFlash"

[speculative]
algorithm = "DFLASH"
num_draft_tokens = 16

[topology]
gpus = 2
gpu_types = ["H100"]
tp_size = 2

[workload]
questions = {questions}
shots = 5
max_tokens = 64
concurrency = 4
warmup_requests = 1

[floors]
accept_length = {floor}
"""


@pytest.fixture
def fake_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, str]:
    """Environment in which `python -m sglang.launch_server` is the test double (which runs
    SGLang 0.5.23's own bookkeeping from its wheel)."""
    from tests.audit.conftest import wheel_for

    wheel_for("0.5.23")
    pidfile = tmp_path / "server.pids"
    env = {
        "PYTHONPATH": os.pathsep.join(filter(None, [str(FAKE_SGLANG),
                                                    os.environ.get("PYTHONPATH")])),
        "HARNESS_GPU_INVENTORY": "2xH100:80",
        "FAKE_SGLANG_PIDFILE": str(pidfile),
        "FAKE_SGLANG_MODE": "ok",
        "HF_HUB_OFFLINE": "1",  # the draft is a hub id: never reach for the network
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return env


@pytest.fixture
def write_suite(tmp_path: Path) -> Callable[..., Path]:
    def write(name: str = "fake_gemma", floor: float = 5.4, questions: int = 8,
              timeout: float = 30) -> Path:
        path = tmp_path / f"{name}.toml"
        path.write_text(SUITE_TEMPLATE.format(name=name, floor=floor, questions=questions,
                                              timeout=timeout))
        return path

    return write


def server_pids(pidfile: Path, wait_s: float = 10.0) -> list[int]:
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if pidfile.exists() and pidfile.read_text().strip():
            return json.loads(pidfile.read_text())
        time.sleep(0.05)
    raise AssertionError(f"the fake server never wrote {pidfile}")


def alive(pids: list[int]) -> list[int]:
    """Pids still running (zombies count as dead: they hold no resources)."""
    living = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                living.append(pid)
        except psutil.NoSuchProcess:
            pass
    return living


def assert_no_orphans(pids: list[int], wait_s: float = 5.0) -> None:
    deadline = time.monotonic() + wait_s
    while alive(pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert alive(pids) == [], f"processes left running: {alive(pids)}"


PYTHON = sys.executable
