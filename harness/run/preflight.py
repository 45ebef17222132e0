"""Preflight: what GPUs this host has (without torch) and whether a suite fits.

Runs before any heavy install or launch, so a host that cannot run a suite
ends in seconds with the reason (`needs 2 x H100, found 0`).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.errors import BadInput
from harness.results.record import GPUInfo
from harness.suite.serving import Topology

INVENTORY_ENV = "HARNESS_GPU_INVENTORY"
NVIDIA_SMI_QUERY = ["--query-gpu=index,name,memory.total,uuid", "--format=csv,noheader,nounits"]
# nvidia-smi reports an 80 GB H100 as 81559 MiB (79.6 GiB): allow marketing-vs-binary slack.
MEMORY_SLACK = 0.97
_COMPACT = re.compile(r"^(\d+)\s*x\s*([A-Za-z0-9_\- ]+?)(?::(\d+(?:\.\d+)?))?$")


def _parse_compact(spec: str) -> list[GPUInfo]:
    """`4xH100:80` -> four H100s of 80 GiB; several groups separated by `,`."""
    gpus: list[GPUInfo] = []
    for group in filter(None, (part.strip() for part in spec.split(","))):
        match = _COMPACT.match(group)
        if not match:
            raise BadInput(
                f"{INVENTORY_ENV}={spec!r}: cannot read {group!r}; "
                "expected COUNTxMODEL[:GiB] such as 4xH100:80, or a JSON file path"
            )
        count, name, memory = int(match[1]), match[2].strip(), float(match[3] or 0)
        for _ in range(count):
            gpus.append(GPUInfo(index=len(gpus), name=name, memory_gib=memory))
    return gpus


def _parse_inventory_file(path: Path) -> list[GPUInfo]:
    try:
        items = json.loads(path.read_text())
        return [GPUInfo.model_validate(item) for item in items]
    except (OSError, ValueError, TypeError) as error:
        raise BadInput(f"{INVENTORY_ENV}: cannot read GPU inventory {path}: {error}") from None


def _query_nvidia_smi() -> list[GPUInfo]:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return []
    try:
        out = subprocess.run(
            [exe, *NVIDIA_SMI_QUERY], capture_output=True, text=True, timeout=30, check=True
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    gpus = []
    for line in out.strip().splitlines():
        fields = [f.strip() for f in line.split(",")]
        if len(fields) < 3:
            continue
        try:
            memory_mib = float(fields[2])
        except ValueError:  # "[N/A]" on some virtualised GPUs
            memory_mib = 0.0
        gpus.append(
            GPUInfo(
                index=int(fields[0]),
                name=fields[1],
                memory_gib=round(memory_mib / 1024, 1),  # nvidia-smi reports MiB
                uuid=fields[3] if len(fields) > 3 else None,
            )
        )
    return gpus


def gpu_inventory() -> list[GPUInfo]:
    """GPUs of this host: a simulated inventory when `HARNESS_GPU_INVENTORY` is set."""
    simulated = os.environ.get(INVENTORY_ENV)
    if simulated is not None:
        path = Path(simulated)
        return _parse_inventory_file(path) if path.suffix == ".json" else _parse_compact(simulated)
    return _query_nvidia_smi()


def driver_version() -> str | None:
    exe = shutil.which("nvidia-smi")
    if exe is None or os.environ.get(INVENTORY_ENV) is not None:
        return None
    try:
        out = subprocess.run(
            [exe, "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=30, check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return out.strip().splitlines()[0] if out.strip() else None


def _matches_type(gpu: GPUInfo, accepted: Sequence[str]) -> bool:
    name = gpu.name.upper().replace("NVIDIA", "")
    return not accepted or any(kind.upper() in name for kind in accepted)


@dataclass(frozen=True)
class Fit:
    fits: bool
    reason: str
    devices: tuple[int, ...] = ()


def check_fit(
    topology: Topology, gpus: Sequence[GPUInfo], allowed: Sequence[int] | None = None
) -> Fit:
    """Pick the GPUs a local launch of the topology takes (`gpus` per node, every node on
    this host: SGLang's own `--nnodes` over 127.0.0.1) of an accepted type and size, or say
    why not. A scheduler's launch asks the scheduler instead (harness.run.schedulers)."""
    needed = topology.gpus * topology.nnodes
    if needed == 0:
        return Fit(True, "needs no GPU")
    pool = [g for g in gpus if allowed is None or g.index in allowed]
    least_memory = topology.min_memory_gib * MEMORY_SLACK
    usable = [
        g for g in pool
        if _matches_type(g, topology.gpu_types) and g.memory_gib >= least_memory
    ]
    kinds = "/".join(topology.gpu_types) or "GPU"
    nodes = f" ({topology.gpus} per node x {topology.nnodes} nodes)" if topology.nnodes > 1 \
        else ""
    if len(usable) < needed:
        memory = f" with >= {topology.min_memory_gib:g} GiB" if topology.min_memory_gib else ""
        found = ", ".join(sorted({g.name for g in pool})) or "none"
        return Fit(
            False,
            f"needs {needed} x {kinds}{memory}{nodes}, found {len(usable)} (GPUs here: "
            f"{found})",
        )
    chosen = tuple(g.index for g in usable[:needed])
    return Fit(True, f"uses {needed} x {kinds}{nodes}: devices {list(chosen)}", chosen)
