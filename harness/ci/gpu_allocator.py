"""A file-locked GPU allocator: processes on one host lease disjoint sets of GPUs.

pytest-xdist workers (or several CI jobs on one runner) each ask for the GPUs a
suite's topology needs; the allocator hands out devices nobody else holds, so the
servers they launch (with CUDA_VISIBLE_DEVICES) never share a GPU.

State lives in one JSON file guarded by a `filelock.FileLock`; every change is a
read-modify-write under that lock. A lease names its holder's pid and process
start time, so a lease whose holder died (crash, SIGKILL) is reclaimed by the
next caller instead of blocking the GPUs forever; the start time guards against
a recycled pid. Every acquire and release is also appended to a JSONL log, which
tells afterwards who held what and when.
"""

from __future__ import annotations

import json
import os
import socket
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypedDict

import psutil
from filelock import FileLock

from harness.errors import TopologySkip
from harness.results.record import GPUInfo
from harness.run.preflight import check_fit
from harness.suite.serving import Topology

LOCK_DIR_ENV = "HARNESS_GPU_LOCK_DIR"
STATE_FILE = "gpu-leases.json"
LOG_FILE = "gpu-leases.log.jsonl"


class GPUUnavailable(TopologySkip):
    """The inventory can never satisfy the request (too few or the wrong GPUs)."""


class LeaseTimeout(TopologySkip):
    """The GPUs exist but stayed held by others for longer than we may wait."""


@dataclass(frozen=True)
class Lease:
    lease_id: str
    devices: tuple[int, ...]
    owner: str
    pid: int
    acquired_at: float


@dataclass
class _Holder:
    pid: int
    started: float | None  # process create time; None when it cannot be read
    host: str


class LeaseEntry(TypedDict):
    """One lease in the state file, as `try_acquire` writes it (the file is read back as
    this, unchecked: only allocators write it, under the lock)."""

    devices: list[int]
    owner: str
    pid: int
    started: float | None
    host: str
    acquired_at: float


def _process_started(pid: int) -> float | None:
    try:
        return psutil.Process(pid).create_time()
    except (psutil.Error, OSError):
        return None


def _holder_alive(entry: LeaseEntry) -> bool:
    if entry.get("host") != socket.gethostname():
        return True  # a lease from another host (shared dir): never ours to judge
    started = _process_started(int(entry["pid"]))
    if started is None:
        return False
    recorded = entry.get("started")
    # a recycled pid belongs to a process that started later than the holder did
    return recorded is None or abs(started - float(recorded)) < 1.0


@dataclass
class GPUAllocator:
    """Leases from `inventory`, coordinated through files in `lock_dir`."""

    lock_dir: Path
    inventory: Sequence[GPUInfo]
    poll_s: float = 0.5
    clock: Callable[[], float] = time.monotonic
    _holder: _Holder = field(init=False)

    def __post_init__(self) -> None:
        self.lock_dir = Path(self.lock_dir)
        self.lock_dir.mkdir(parents=True, exist_ok=True)
        pid = os.getpid()
        self._holder = _Holder(pid=pid, started=_process_started(pid), host=socket.gethostname())

    @property
    def state_path(self) -> Path:
        return self.lock_dir / STATE_FILE

    @property
    def log_path(self) -> Path:
        return self.lock_dir / LOG_FILE

    def _lock(self) -> FileLock:
        return FileLock(str(self.state_path) + ".lock")

    def _read(self) -> dict[str, LeaseEntry]:
        try:
            data = json.loads(self.state_path.read_text())
        except FileNotFoundError:
            return {}
        except ValueError:
            return {}  # a torn file cannot happen under the lock; a foreign one is discarded
        leases: dict[str, LeaseEntry] = data.get("leases", {}) if isinstance(data, dict) else {}
        return leases

    def _write(self, leases: dict[str, LeaseEntry]) -> None:
        tmp = self.state_path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"leases": leases}, indent=1))
        os.replace(tmp, self.state_path)

    def _log(self, event: str, lease_id: str, entry: LeaseEntry) -> None:
        row = {"event": event, "lease": lease_id, "time": time.time(), **entry}
        with self.log_path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(row) + "\n")

    def _reap(self, leases: dict[str, LeaseEntry]) -> None:
        for lease_id, entry in list(leases.items()):
            if not _holder_alive(entry):
                del leases[lease_id]
                self._log("reclaimed", lease_id, entry)

    def held(self) -> dict[str, tuple[int, ...]]:
        """Live leases by id (stale ones are reclaimed first)."""
        with self._lock():
            leases = self._read()
            self._reap(leases)
            self._write(leases)
        return {key: tuple(entry["devices"]) for key, entry in leases.items()}

    def try_acquire(self, topology: Topology, owner: str = "") -> Lease | None:
        """A lease now, or None when the GPUs are busy; GPUUnavailable if never possible."""
        if topology.gpus == 0:
            return Lease(uuid.uuid4().hex, (), owner, self._holder.pid, time.time())
        overall = check_fit(topology, self.inventory)
        if not overall.fits:
            raise GPUUnavailable(overall.reason)
        with self._lock():
            leases = self._read()
            self._reap(leases)
            busy = {device for entry in leases.values() for device in entry["devices"]}
            free = [gpu.index for gpu in self.inventory if gpu.index not in busy]
            fit = check_fit(topology, self.inventory, allowed=free)
            if not fit.fits:
                self._write(leases)
                return None
            lease = Lease(uuid.uuid4().hex, fit.devices, owner, self._holder.pid, time.time())
            entry: LeaseEntry = {
                "devices": list(lease.devices),
                "owner": owner,
                "pid": self._holder.pid,
                "started": self._holder.started,
                "host": self._holder.host,
                "acquired_at": lease.acquired_at,
            }
            leases[lease.lease_id] = entry
            self._write(leases)
            self._log("acquired", lease.lease_id, entry)
        return lease

    def acquire(self, topology: Topology, owner: str = "", timeout_s: float = 0.0) -> Lease:
        """Wait up to `timeout_s` for the GPUs; LeaseTimeout (a skip) when they stay busy."""
        deadline = self.clock() + timeout_s
        while True:
            lease = self.try_acquire(topology, owner)
            if lease is not None:
                return lease
            if self.clock() >= deadline:
                raise LeaseTimeout(
                    f"waited {timeout_s:g} s for {topology.gpus} GPU(s); all busy "
                    f"(held: {sorted(self.held().values())})"
                )
            time.sleep(self.poll_s)

    def release(self, lease: Lease) -> None:
        if not lease.devices:
            return
        with self._lock():
            leases = self._read()
            entry = leases.pop(lease.lease_id, None)
            self._write(leases)
            if entry is not None:
                self._log("released", lease.lease_id, entry)

    @contextmanager
    def lease(self, topology: Topology, owner: str = "", timeout_s: float = 0.0) -> Iterator[Lease]:
        """Hold GPUs for the block; released on every exit path, exceptions included."""
        held = self.acquire(topology, owner, timeout_s)
        try:
            yield held
        finally:
            self.release(held)


def read_lease_log(lock_dir: Path) -> list[dict[str, object]]:
    """The acquire/release/reclaim events, oldest first."""
    path = Path(lock_dir) / LOG_FILE
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
