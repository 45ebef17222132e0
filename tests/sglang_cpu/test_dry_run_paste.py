"""Issue 31: `harness run tiny_ngram_sglang_cpu --dry-run` prints a launch line that, pasted
into a shell, starts the real SGLang 0.5.23 server on CPU (its environment included: the
kernel stand-in on PYTHONPATH, SGLANG_USE_CPU_ENGINE=1)."""

from __future__ import annotations

import os
import subprocess
import sys

from harness.run.launch import free_port, kill_tree
from tests.fixtures.pasted_line import wait_serving
from tests.sglang_cpu.conftest import REPO, SPEC


def test_the_pasted_dry_run_line_serves(sglang_cpu) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([sys.executable, "-m", "harness", "run", "tiny_ngram_sglang_cpu",
                           "--sglang", SPEC, "--dry-run"], cwd=REPO, capture_output=True,
                          text=True, timeout=300, check=True,
                          env={**env, "PYTHONPATH": str(REPO)})
    [line] = [line.removeprefix("launch     ") for line in done.stdout.splitlines()
              if line.startswith("launch     ")]
    assert "SGLANG_USE_CPU_ENGINE=1" in line and "cpu_stand_ins" in line
    port = free_port()
    server = subprocess.Popen(["bash", "-c", "exec " + line.replace("--port 30000",
                                                                   f"--port {port}")],
                              cwd=REPO, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_serving(server, port, within_s=600, every_s=0.5)
    finally:
        kill_tree(server.pid)
