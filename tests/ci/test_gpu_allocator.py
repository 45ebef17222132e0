"""The GPU allocator across real processes: disjoint leases, release on crash, bounded wait."""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from pathlib import Path

import pytest

from harness.ci.gpu_allocator import (
    GPUAllocator,
    GPUUnavailable,
    LeaseTimeout,
    read_lease_log,
)
from harness.results.record import GPUInfo
from harness.suite.serving import Topology


def inventory(count: int = 4, name: str = "NVIDIA H100 80GB HBM3") -> list[GPUInfo]:
    return [GPUInfo(index=i, name=name, memory_gib=80.0) for i in range(count)]


def _hold(lock_dir: str, gpus: int, hold_s: float, rounds: int) -> None:
    allocator = GPUAllocator(Path(lock_dir), inventory(), poll_s=0.02)
    for _ in range(rounds):
        with allocator.lease(
            Topology(gpus=gpus, tp_size=gpus), owner=str(os.getpid()), timeout_s=60
        ):
            time.sleep(hold_s)


def _acquire_and_die(lock_dir: str, how: str) -> None:
    allocator = GPUAllocator(Path(lock_dir), inventory())
    allocator.acquire(Topology(gpus=3), owner="doomed")
    if how == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    os._exit(1)  # no finally, no atexit: as a crash leaves it


def _intervals(lock_dir: Path) -> list[tuple[float, float, set[int]]]:
    acquired: dict[str, tuple[float, list[int]]] = {}
    spans = []
    for event in read_lease_log(lock_dir):
        if event["event"] == "acquired":
            acquired[event["lease"]] = (event["time"], event["devices"])
        else:
            start, devices = acquired.pop(event["lease"])
            spans.append((start, event["time"], set(devices)))
    assert not acquired, "every lease was released"
    return spans


def test_concurrent_processes_hold_disjoint_gpus(tmp_path: Path) -> None:
    context = multiprocessing.get_context("spawn")
    workers = [
        context.Process(target=_hold, args=(str(tmp_path), gpus, 0.05, 6))
        for gpus in (1, 1, 1, 2, 2)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(120)
        assert worker.exitcode == 0
    spans = _intervals(tmp_path)
    assert len(spans) == 30
    overlapping = 0
    for i, (start_a, end_a, devices_a) in enumerate(spans):
        for start_b, end_b, devices_b in spans[i + 1 :]:
            if start_a < end_b and start_b < end_a:  # held at the same time
                overlapping += 1
                assert not devices_a & devices_b
    assert overlapping > 0, "the test must actually exercise concurrency"
    assert GPUAllocator(tmp_path, inventory()).held() == {}


@pytest.mark.parametrize("how", ["exit", "kill"])
def test_lease_of_a_crashed_process_is_reclaimed(tmp_path: Path, how: str) -> None:
    context = multiprocessing.get_context("spawn")
    doomed = context.Process(target=_acquire_and_die, args=(str(tmp_path), how))
    doomed.start()
    doomed.join(60)
    assert doomed.exitcode != 0
    state = (tmp_path / "gpu-leases.json").read_text()
    assert "doomed" in state  # the crash left its lease behind
    allocator = GPUAllocator(tmp_path, inventory())
    lease = allocator.acquire(Topology(gpus=4), timeout_s=0)
    assert lease.devices == (0, 1, 2, 3)
    assert [e["event"] for e in read_lease_log(tmp_path)] == ["acquired", "reclaimed", "acquired"]


def test_lease_released_when_the_block_raises(tmp_path: Path) -> None:
    allocator = GPUAllocator(tmp_path, inventory())
    with pytest.raises(RuntimeError), allocator.lease(Topology(gpus=2)):
        raise RuntimeError("suite crashed")
    assert allocator.held() == {}


def test_more_gpus_than_the_inventory_is_unavailable_at_once(tmp_path: Path) -> None:
    allocator = GPUAllocator(tmp_path, inventory(4))
    started = time.monotonic()
    with pytest.raises(GPUUnavailable, match="needs 8 x GPU, found 4"):
        allocator.acquire(Topology(gpus=8), timeout_s=30)
    assert time.monotonic() - started < 5


def test_wrong_gpu_type_is_unavailable(tmp_path: Path) -> None:
    allocator = GPUAllocator(tmp_path, inventory(4, "NVIDIA A100-SXM4-40GB"))
    with pytest.raises(GPUUnavailable, match="H100"):
        allocator.acquire(Topology(gpus=1, gpu_types=["H100"]))


def test_busy_gpus_time_out_with_the_reason(tmp_path: Path) -> None:
    first = GPUAllocator(tmp_path, inventory(2), poll_s=0.01)
    held = first.acquire(Topology(gpus=2))
    with pytest.raises(LeaseTimeout, match=r"waited 0.1 s for 1 GPU"):
        first.acquire(Topology(gpus=1), timeout_s=0.1)
    first.release(held)
    assert first.acquire(Topology(gpus=1)).devices == (0,)


def test_cpu_suite_needs_no_lease(tmp_path: Path) -> None:
    allocator = GPUAllocator(tmp_path, [])
    lease = allocator.acquire(Topology(gpus=0))
    assert lease.devices == ()
    allocator.release(lease)
    assert read_lease_log(tmp_path) == []
