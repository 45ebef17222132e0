"""A build stopped midway (SIGTERM, SIGKILL of the whole job, a timeout) leaves no
process behind, and whatever it left on disk is cleaned by the next build."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.builds import parse_build_spec, pid_alive, prepare, resolve_build
from harness.errors import EngineError
from tests.builds.repos import PIP_ARGS, make_slow_sglang_repo

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs the git executable")

# The harness's own handling of SIGTERM (runner.sigterm_as_interrupt): raise, unwind.
BUILD = """
import signal, sys
from harness.builds import parse_build_spec, prepare
from harness.errors import Interrupted
def stop(signum, frame):
    raise Interrupted("stopped by SIGTERM")
signal.signal(signal.SIGTERM, stop)
try:
    prepare(parse_build_spec(sys.argv[1]))
except Interrupted as error:
    print(error.message, flush=True)
    sys.exit(130)
"""


@pytest.fixture
def slow(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path, dict[str, str]]:
    cache = tmp_path / "cache"
    env = {**os.environ, "HARNESS_CACHE": str(cache), "HARNESS_PIP_ARGS": PIP_ARGS,
           "SLOW_BACKEND_PID": str(tmp_path / "backend.pid"),
           "HARNESS_SGLANG_DEVICE": "cuda"}  # a GPU host's path: the checkout pip-installed
    for name in ("HARNESS_CACHE", "HARNESS_PIP_ARGS", "SLOW_BACKEND_PID",
                 "HARNESS_SGLANG_DEVICE"):
        monkeypatch.setenv(name, env[name])
    return make_slow_sglang_repo(tmp_path / "sglang"), tmp_path / "backend.pid", env


def _start(repo: Path, env: dict[str, str], pid_file: Path) -> tuple[subprocess.Popen[str], int]:
    job = subprocess.Popen([sys.executable, "-c", BUILD, str(repo)], env=env, text=True,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           start_new_session=True)
    deadline = time.monotonic() + 120
    while not pid_file.is_file() or not pid_file.read_text():
        assert job.poll() is None, job.communicate()
        assert time.monotonic() < deadline, "the build never reached its backend"
        time.sleep(0.1)
    return job, int(pid_file.read_text())


def _gone(pid: int) -> bool:
    for _ in range(100):
        if not pid_alive(pid):
            return True
        time.sleep(0.1)
    return False


def test_sigterm_mid_install_stops_pip_and_leaves_nothing(
    slow: tuple[Path, Path, dict[str, str]],
) -> None:
    repo, pid_file, env = slow
    env_dir = resolve_build(parse_build_spec(str(repo))).env_dir
    job, backend = _start(repo, env, pid_file)
    job.send_signal(signal.SIGTERM)  # to the harness only, not its group
    out, err = job.communicate(timeout=60)
    assert job.returncode == 130, err
    assert out.strip() == "stopped by SIGTERM"
    assert _gone(backend), "pip's build backend outlived the harness"
    assert not env_dir.exists()
    assert not list(env_dir.parent.glob("*.building-*"))


def test_killed_job_leftovers_are_cleaned_by_the_next_build(
    slow: tuple[Path, Path, dict[str, str]], monkeypatch: pytest.MonkeyPatch,
) -> None:
    repo, pid_file, env = slow
    env_dir = resolve_build(parse_build_spec(str(repo))).env_dir
    job, backend = _start(repo, env, pid_file)
    os.killpg(job.pid, signal.SIGKILL)  # a CI job cancelled hard: nothing can clean up
    job.communicate(timeout=60)
    assert _gone(backend)
    leftovers = list(env_dir.parent.glob(f"{env_dir.name}.building-{job.pid}"))
    assert leftovers and env_dir.is_dir() and not (env_dir / ".harness-complete").exists()
    # The next build removes the dead job's snapshot and half-made environment, then
    # builds; here it hangs in the same backend, so a short install limit ends it.
    monkeypatch.setenv("HARNESS_INSTALL_TIMEOUT_S", "3")
    with pytest.raises(EngineError) as caught:
        prepare(parse_build_spec(str(repo)))
    assert "did not finish within 3 s and was stopped" in caught.value.message
    assert "HARNESS_INSTALL_TIMEOUT_S" in caught.value.message
    assert not leftovers[0].exists() and not env_dir.exists()
    assert not list(env_dir.parent.glob("*.building-*"))
    assert _gone(int(pid_file.read_text()))
