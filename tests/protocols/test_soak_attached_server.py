"""`harness soak SUITE --server URL` on a real reference-engine server someone else started:
the soak attaches as `harness run --server` does (nothing launched, nothing killed, the
server checked against the suite first), repeats the workload on it for the duration, and
records its windows and drift; the server still answers afterwards. A server that is not
the suite's is refused naming the field (exit 2), nothing listening is an engine error
(exit 3), and `--server` with a flag that names what to launch is bad input (exit 2)."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from harness.results.readers import read_requests, read_run, read_soak
from harness.results.soaks import SOAK_FILE
from harness.run.launch import free_port
from harness.suite.model import SUITES_DIR

pytestmark = pytest.mark.slow  # a reference-engine server, one 8 s soak on it

TINY = SUITES_DIR / "tiny_dflash_cpu.toml"
SOAK = ["--duration", "8s", "--window", "4s", "--questions", "2", "--no-progress",
        "--no-plot"]


def soak(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness", "soak", *args], capture_output=True,
                          text=True, timeout=600, check=False, env=dict(os.environ))


@pytest.fixture(scope="module")
def reference_server() -> Iterator[str]:
    from tests.reference_engine.conftest import engine_available, start_server, stop_server

    if not engine_available():
        pytest.skip("the reference extra (torch, transformers, dflash) is not installed")
    from harness.builds import cache_root
    from reference_engine.checkpoints import ensure_checkpoints

    target, draft = ensure_checkpoints(sys.executable, cache_root())
    server = start_server(target, draft, "--block-size", "8", "--workers", "1")
    yield server.base
    stop_server(server)


def test_a_soak_of_an_attached_server(reference_server: str, tmp_path: Path) -> None:
    results = tmp_path / "r"
    done = soak("tiny_dflash_cpu", "--server", reference_server, "--results", str(results),
                *SOAK)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    [folder] = [p.parent for p in (results / "soak").glob(f"*/*/{SOAK_FILE}")]
    record = read_soak(folder)
    assert record.status == "pass" and record.metric == "server_avg"
    assert record.prefix_cache.startswith("attached server (--server)")
    assert [w.index for w in record.windows] == [0, 1]
    for window in record.windows:
        assert window.accept_length is not None and math.isfinite(window.accept_length)
        assert window.accept_length >= 1.0 and window.n_requests > 0
    assert record.drift is not None and record.drift.result is not None
    slope_ci = record.drift.result["slope_ci"]
    assert isinstance(slope_ci, list) and all(math.isfinite(float(v)) for v in slope_ci)
    assert record.run_dir is not None
    run = read_run(results / record.run_dir)  # the soak's run: attached, not launched
    assert run.launch is not None and run.launch.launcher == "attached"
    assert run.launch.command == [] and run.build.method == "attached"
    rows = read_requests(results / record.run_dir, run)
    assert len(rows) == sum(w.n_requests for w in record.windows)
    assert httpx.get(reference_server + "/health", timeout=10).status_code == 200  # left up


def test_a_server_that_is_not_the_suites_is_refused(reference_server: str,
                                                     tmp_path: Path) -> None:
    other = tmp_path / "tiny_block6.toml"
    other.write_text(TINY.read_text().replace("block_size = 8", "block_size = 6")
                     .replace('name = "tiny_dflash_cpu"', 'name = "tiny_block6"'))
    done = soak(str(other), "--server", reference_server, "--results", str(tmp_path / "r"),
                *SOAK)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "speculative_num_draft_tokens is 8, the suite declares 6" in done.stderr
    assert "Traceback" not in done.stderr
    assert httpx.get(reference_server + "/health", timeout=10).status_code == 200


def test_nothing_listening_is_an_engine_error(tmp_path: Path) -> None:
    done = soak("tiny_dflash_cpu", "--server", f"http://127.0.0.1:{free_port()}",
                "--results", str(tmp_path / "r"), *SOAK)
    assert done.returncode == 3, done.stdout + done.stderr
    assert "does not answer" in done.stdout + done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize(("extra", "words"), [
    (("--server", "ftp://h:1"), "--server"),
    (("--server", "http://127.0.0.1:1", "--build", "sglang==0.5.23"), "--sglang/--build"),
    (("--server", "http://127.0.0.1:1", "--engine-python", sys.executable),
     "--engine-python"),
])
def test_server_with_a_launch_flag_or_a_bad_url_exits_2(tmp_path: Path, extra: tuple[str, ...],
                                                        words: str) -> None:
    done = soak("tiny_dflash_cpu", *extra, "--results", str(tmp_path / "r"), *SOAK)
    assert done.returncode == 2, done.stdout + done.stderr
    assert words in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "r").exists()  # nothing ran
