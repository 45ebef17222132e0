"""A topology as processes: one launch line per node of each side, all from the engine's
own multi-process launch (SGLang's `--nnodes`/`--node-rank`/`--dist-init-addr`, vLLM's
`--nnodes`/`--node-rank`/`--master-addr`), never a process layout of the harness's.

Whoever starts the processes (this host, a Slurm job step, a Kubernetes LeaderWorkerSet)
takes the lines from here; only node 0 of a side answers HTTP, the others join it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from harness.engines.interface import Placement
from harness.engines.registry import secret_flags
from harness.secrets import REDACTED, redact_argv, redact_env

if TYPE_CHECKING:
    from harness.suite.model import Suite
    from harness.suite.serving import Topology


class Launchable(Protocol):
    """What a scheduler asks of an engine: its launch line per placement, and the Python
    it runs in (`harness.run.plan.PreparedEngine`, or a dry run's planned engine; the plan
    imports the run's options, which name a scheduler's, so not that class here)."""

    @property
    def python(self) -> str: ...

    def command(self, host: str, port: int, placement: Placement | None = None
                ) -> list[str]: ...


class PreparedLaunch(Launchable, Protocol):
    """A prepared engine, with the suite it serves (its topology)."""

    @property
    def suite(self) -> Suite: ...


@dataclass(frozen=True)
class NodeLine:
    """One process of a deployment: its name, where it sits, its launch line."""

    name: str  # "server", "node 1", "decode", "decode node 1"
    placement: Placement
    command: list[str]

    @property
    def serves_http(self) -> bool:
        return self.placement.node_rank == 0


def placements(topology: Topology, dist_init_addr: str | None,
               bootstrap_port: int | None = None) -> list[tuple[str, Placement]]:
    """Every process of a topology, named: per side (one, or prefill and decode), per node.
    `dist_init_addr`: host:port of node 0's rendezvous (several nodes); `bootstrap_port`:
    the prefill side's, where a split's decode side fetches the KV cache."""
    named = []
    for side in topology.sides:
        for node in range(topology.nnodes):
            placement = Placement(node_rank=node, nnodes=topology.nnodes,
                                  dist_init_addr=dist_init_addr if topology.nnodes > 1
                                  else None, side=side,
                                  bootstrap_port=bootstrap_port if topology.disaggregation
                                  else None)
            name = "server" if side == "serve" else side
            if node:
                name = f"node {node}" if side == "serve" else f"{side} node {node}"
            named.append((name, placement))
    return named


def node_lines(engine: PreparedLaunch, host: str, port: int, dist_init_addr: str | None,
               ports: dict[str, int] | None = None, bootstrap_port: int | None = None,
               node_port: Callable[[int], int] | None = None) -> list[NodeLine]:
    """The launch line of every process of the suite's topology (`placements`); `port`:
    the HTTP port of a one-sided deployment (`ports`: each side's). `node_port(rank)`
    gives a node after the first a port of its own: SGLang starts a health server on
    every node (`--port` on each), which on one host would take node 0's port."""
    lines = []
    for name, placement in placements(engine.suite.topology, dist_init_addr, bootstrap_port):
        chosen = (ports or {}).get(placement.side, port)
        if placement.node_rank and node_port is not None:
            chosen = node_port(placement.node_rank)
        lines.append(NodeLine(name, placement, engine.command(host, chosen, placement)))
    return lines


def secret_words(command: Sequence[str], kind: str) -> list[bool]:
    """Which words of a launch line hold a secret: those the one redactor (harness.secrets,
    with the engine's own secret flags) changes, and a dry run's already redacted ones. A
    scheduler passes them to the job in its environment, never in what it writes."""
    shown = redact_argv(command, secret_flags(kind))
    return [word != seen or REDACTED in word for word, seen in zip(command, shown, strict=True)]


def secret_variable(name: str, value: str) -> bool:
    """Whether a variable of the server's environment is a secret (harness.secrets: by its
    name or its value)."""
    shown: Mapping[str, str] = redact_env({name: value})
    return shown != {name: value} or REDACTED in value


def checked_lines(lines: list[NodeLine]) -> dict[str, list[str]]:
    """The lines a release's own parser should read before a launch: node 0 and the last
    node of each side (the nodes between differ from the last only in `--node-rank`)."""
    chosen: dict[str, list[str]] = {}
    for line in lines:
        last = max(other.placement.node_rank for other in lines
                   if other.placement.side == line.placement.side)
        if line.placement.node_rank in (0, last):
            chosen[line.name] = line.command
    return chosen
