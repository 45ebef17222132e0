"""Several nodes on this host: the engine's own multi-node launch over 127.0.0.1 (SGLang's
`--nnodes N --node-rank R --dist-init-addr 127.0.0.1:PORT`), one process tree per node,
each a `launch.Server` (own process group, log, teardown). Node 0 serves HTTP; the run
waits for it, watches every node (a node that dies ends the run within seconds, naming
it) and stops every node's tree at the end, whatever happened.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

from harness.run.launch import LOOPBACK, Server, ServerSpec, started
from harness.run.schedulers.deployment import NodeLine


class LocalNodes:
    """Every node of a deployment as a process tree on this host; use as a context
    manager so that all of them die."""

    def __init__(self, lines: Sequence[NodeLine], head: ServerSpec, logs: Path) -> None:
        self.head = Server(head)
        self.spec = head
        self.workers = [
            Server(ServerSpec(command=line.command, port=head.port, env=head.env,
                              log_path=logs / f"server-{line.name.replace(' ', '-')}.log",
                              launch_timeout_s=head.launch_timeout_s, ready_paths=()))
            for line in lines if not line.serves_http]
        self.names = [line.name for line in lines if not line.serves_http]

    @property
    def base_url(self) -> str:
        return self.spec.base_url

    @property
    def ready_after_s(self) -> float | None:
        return self.head.ready_after_s

    def start(self) -> None:
        self.head.start()
        for worker in self.workers:
            worker.start()

    def death(self) -> str | None:
        """None while every node lives; else which node died and how (its log's tail)."""
        if (death := Server.death(self.head)) is not None:  # its own, not the wait's hook
            return f"node 0: {death}"
        for name, worker in zip(self.names, self.workers, strict=True):
            if (death := worker.death()) is not None:
                return f"{name}: {death}"
        return None

    def wait_ready(self) -> float:
        """Node 0's readiness, with every other node watched while it waits: a node that
        dies while the deployment starts ends the wait at once."""
        head_death = self.head.death
        self.head.death = self.death  # type: ignore[method-assign]
        try:
            ready = self.head.wait_ready()
        finally:
            self.head.death = head_death  # type: ignore[method-assign]
        for worker in self.workers:
            worker.wait_ready()  # no HTTP: marks its tree as serving, for the watch
        return ready

    def stop(self) -> None:
        for server in [*self.workers, self.head]:
            with contextlib.suppress(Exception):
                server.stop()

    def __enter__(self) -> LocalNodes:
        started(self.start, self.stop)
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


def rendezvous(port: int) -> str:
    """Node 0's address on this host, for `--dist-init-addr`."""
    return f"{LOOPBACK}:{port}"
