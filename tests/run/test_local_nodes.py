"""Several nodes on this host (harness.run.schedulers.local): node 0 serves HTTP, the others
join it; a node that dies during the start or the run is named within seconds, and every
node's process tree is gone after, whatever happened."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from harness.engines.interface import Placement
from harness.errors import EngineError
from harness.run.launch import ServerSpec, free_port
from harness.run.schedulers.deployment import NodeLine, checked_lines, placements
from harness.run.schedulers.local import LocalNodes
from harness.suite.serving import Topology

SLEEPER = [sys.executable, "-c", "import time; time.sleep(600)"]


def nodes(tmp_path: Path, head: list[str], worker: list[str], timeout: float = 60
          ) -> LocalNodes:
    port = free_port()
    head = [word.replace("PORT", str(port)) for word in head]
    lines = [NodeLine("server", Placement(0, 2, "127.0.0.1:1"), head),
             NodeLine("node 1", Placement(1, 2, "127.0.0.1:1"), worker)]
    spec = ServerSpec(command=head, log_path=tmp_path / "server.log", port=port,
                      launch_timeout_s=timeout, ready_paths=("/",))
    return LocalNodes(lines, spec, tmp_path)


def http(port_word: str = "PORT") -> list[str]:
    return [sys.executable, "-m", "http.server", port_word, "--bind", "127.0.0.1"]


def test_every_node_serves_then_all_are_stopped(tmp_path: Path) -> None:
    group = nodes(tmp_path, http(), SLEEPER)
    with group:
        assert group.wait_ready() >= 0
        assert group.death() is None
        pids = [group.head.process.pid, group.workers[0].process.pid]
    for pid in pids:
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == \
            psutil.STATUS_ZOMBIE
    assert (tmp_path / "server-node-1.log").exists()


def test_a_worker_node_that_dies_while_starting_ends_the_wait(tmp_path: Path) -> None:
    dies = [sys.executable, "-c", "import sys; print('node 1 failed'); sys.exit(3)"]
    never_ready = [sys.executable, "-c", "import time; time.sleep(600)"]
    started = time.monotonic()
    with nodes(tmp_path, never_ready, dies) as group, \
            pytest.raises(EngineError, match="node 1: server exited with code 3"):
        group.wait_ready()
    assert time.monotonic() - started < 30


def test_a_node_killed_mid_run_is_named(tmp_path: Path) -> None:
    with nodes(tmp_path, http(), SLEEPER) as group:
        group.wait_ready()
        os.kill(group.workers[0].process.pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while group.death() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert "node 1:" in str(group.death()) and "signal 9" in str(group.death())


def test_placements_name_every_process() -> None:
    named = placements(Topology(gpus=0, tp_size=2, nnodes=2), "h:1")
    assert [name for name, _ in named] == ["server", "node 1"]
    assert [p.node_rank for _, p in named] == [0, 1]
    split = placements(Topology(gpus=0, disaggregation={}), None, 8998)
    assert [name for name, _ in split] == ["prefill", "decode"]
    assert all(p.bootstrap_port == 8998 for _, p in split)
    lines = [NodeLine(f"node {i}" if i else "server", Placement(i, 4, "h:1"), [str(i)])
             for i in range(4)]
    assert list(checked_lines(lines)) == ["server", "node 3"]  # first and last node


# A process that launches two nodes as `harness run` does (LocalNodes), reports every pid
# of their trees, and waits: its SIGKILL runs none of its teardown.
LAUNCHER = """
import json, sys, time
from pathlib import Path
import psutil
from tests.run.test_local_nodes import nodes, http
# node 1 starts a child that leaves the process group (setsid), as an engine's may
worker = [sys.executable, "-c", "import os, subprocess, sys, time; subprocess.Popen("
          "[sys.executable, '-c', 'import os, time; os.setsid(); time.sleep(600)']); "
          "time.sleep(600)"]
group = nodes(Path(sys.argv[1]), http(), worker)
group.start()
group.wait_ready()
time.sleep(0.5)
me = psutil.Process()
print(json.dumps([p.pid for p in me.children(recursive=True)]), flush=True)
time.sleep(600)
"""


def test_every_node_dies_with_a_launcher_killed_by_sigkill(tmp_path: Path) -> None:
    """The launching process's death by SIGKILL ends every node's tree, a child that left
    its node's process group included, within seconds (harness.run.lifeline's watchdog)."""
    root = Path(__file__).resolve().parents[2]
    launcher = subprocess.Popen(
        [sys.executable, "-c", LAUNCHER, str(tmp_path)], stdout=subprocess.PIPE, text=True,
        cwd=root, env={**os.environ, "PYTHONPATH": str(root)}, start_new_session=True)
    assert launcher.stdout is not None
    pids = json.loads(launcher.stdout.readline())
    tree = [psutil.Process(pid) for pid in pids]
    assert len(tree) >= 4  # the watchdog, node 0, node 1 and its child in its own session
    launcher.send_signal(signal.SIGKILL)
    launcher.wait(timeout=10)
    _, alive = psutil.wait_procs(tree, timeout=15)
    assert [p.pid for p in alive if p.status() != psutil.STATUS_ZOMBIE] == []
