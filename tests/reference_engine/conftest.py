"""Fixtures for the CPU reference engine: checkpoints built once, real server processes.

The engine needs torch, transformers and dflash (the `reference` extra). Its Python is
$HARNESS_REFERENCE_PYTHON, else the interpreter running pytest; without those packages
the engine tests skip. Checkpoints come from the harness cache ($HARNESS_CACHE or
~/.cache/spec-harness), built there once (about 4 minutes on 2 cores) if missing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from harness.builds import cache_root
from harness.run.launch import Server as LaunchedServer
from harness.run.launch import ServerSpec, free_port
from harness.suite.model import GSM8KWorkload
from harness.workloads.gsm8k import STOP_STRINGS, build_prompts, load_gsm8k

ENGINE_PYTHON = os.environ.get("HARNESS_REFERENCE_PYTHON", sys.executable)
STOP = list(STOP_STRINGS)


def engine_available() -> bool:
    probe = subprocess.run([ENGINE_PYTHON, "-c", "import torch, transformers, dflash"],
                           capture_output=True, check=False)
    return probe.returncode == 0


@pytest.fixture(scope="session")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    if not engine_available():
        pytest.skip(f"{ENGINE_PYTHON} lacks the reference extra (torch, transformers, dflash)")
    from reference_engine.checkpoints import ensure_checkpoints

    override = os.environ.get("HARNESS_REFERENCE_CHECKPOINTS")  # a folder with target/, draft/
    if override:
        return Path(override) / "target", Path(override) / "draft"
    # The shipped checkpoints, else a build in the harness's cache ($HARNESS_CACHE or
    # ~/.cache/spec-harness), made once under a file lock for every xdist worker.
    return ensure_checkpoints(ENGINE_PYTHON, cache_root())



@dataclass
class Server:
    """A running engine process and a tiny HTTP client for it."""

    base: str
    launched: LaunchedServer

    def call(self, path: str, body: dict[str, Any] | None = None,
             method: str | None = None, headers: dict[str, str] | None = None,
             ) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base + path, data=data, method=method,
                                         headers={"Content-Type": "application/json",
                                                  **(headers or {})})
        try:
            with urllib.request.urlopen(request, timeout=300) as response:
                status, raw = response.status, response.read()
        except urllib.error.HTTPError as error:
            status, raw = error.code, error.read()
        try:
            return status, json.loads(raw) if raw else raw.decode()
        except json.JSONDecodeError:
            return status, raw.decode()

    def generate(self, text: str, **params: Any) -> dict[str, Any]:
        params.setdefault("temperature", 0)
        params.setdefault("max_new_tokens", 48)
        status, payload = self.call("/generate", {"text": text, "sampling_params": params})
        assert status == 200, payload
        return payload


def start_server(target: Path, draft: Path, *extra: str,
                 env: dict[str, str] | None = None) -> Server:
    """The engine as `harness run` launches it: own process group, log file, readiness;
    `env`: more of the server's environment (a suite's engine.env)."""
    port = free_port()
    command = [ENGINE_PYTHON, "-m", "reference_engine", "--target", str(target),
               "--draft", str(draft), "--host", "127.0.0.1", "--port", str(port),
               "--log-level", "warning", *extra]
    log = Path(tempfile.mkdtemp(prefix="reference-engine-")) / "server.log"
    launched = LaunchedServer(ServerSpec(command=command, log_path=log, port=port,
                                         env=env or {}, launch_timeout_s=180))
    launched.start()
    try:
        launched.wait_ready()
    except BaseException:
        launched.stop()
        raise
    return Server(launched.spec.base_url, launched)


def stop_server(server: Server) -> None:
    server.launched.stop()


@pytest.fixture(scope="session")
def server(checkpoints: tuple[Path, Path]) -> Iterator[Server]:
    running = start_server(*checkpoints, "--workers", "2")
    yield running
    stop_server(running)


@pytest.fixture(scope="session")
def prompts() -> list[str]:
    """GSM8K test questions in the harness's 1-shot format (skipped without the data)."""
    data = load_gsm8k()  # ../shared/data or $HARNESS_DATA_DIR, else the `datasets` hub
    workload = GSM8KWorkload(shots=1, questions=12)
    return [prompt.text for prompt in build_prompts(data, workload)]
