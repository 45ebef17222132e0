"""Provenance: everything needed to say what ran where, and nothing secret.

Versions of the engine's packages come from one probe of its environment
(`harness.builds.probe_environment`), never from importing torch into the harness
process. The CPU model and its vector-instruction flags are recorded because the CPU
reference engine's float32 arithmetic (and so, at ties, a greedy token) can differ
between instruction sets (docs/reference-engine.md).
"""

from __future__ import annotations

import os
import platform
import socket
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from harness import __version__
from harness.builds import EnvironmentFacts
from harness.builds.gitrepo import head_state
from harness.results.record import GPUInfo, Provenance
from harness.run.preflight import driver_version
from harness.secrets import is_secret_name, redact_argv, redact_text

REPO_ROOT = Path(__file__).resolve().parents[2]
ENV_PREFIXES = ("CUDA_", "SGLANG_", "HARNESS_", "NCCL_", "TORCH_", "OMP_", "MKL_",
                "HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")
# The instruction-set flags that decide which kernels torch (oneDNN, MKL) runs on a CPU.
ISA_FLAGS = ("sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl",
             "avx512_vnni", "avx512_bf16", "amx_tile", "amx_bf16", "amx_int8",
             "asimd", "sve", "sve2")


def safe_env(env: Mapping[str, str], extra_names: Iterable[str] = ()) -> dict[str, str]:
    """Allow-listed variables only; a variable named like a credential is dropped, and
    every secret in the others redacted."""
    wanted = set(extra_names)
    return {
        name: redact_text(value)
        for name, value in sorted(env.items())
        if (name in wanted or name.startswith(ENV_PREFIXES)) and not is_secret_name(name)
    }


def harness_git() -> tuple[str | None, bool | None]:
    return head_state(REPO_ROOT, exact=True)


def cpu_info(cpuinfo: Path = Path("/proc/cpuinfo")) -> tuple[str | None, list[str]]:
    """(CPU model name, the ISA flags of `ISA_FLAGS` it has), from /proc/cpuinfo on Linux."""
    try:
        text = cpuinfo.read_text(errors="replace")
    except OSError:
        return platform.processor() or None, []
    model: str | None = None
    flags: set[str] = set()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip().lower()
        if model is None and key in ("model name", "cpu model", "hardware"):
            model = value.strip() or None
        elif not flags and key in ("flags", "features"):
            flags = set(value.split())
    return model, [flag for flag in ISA_FLAGS if flag in flags]


def collect(
    facts: EnvironmentFacts | None,  # the engine's environment
    gpus: Sequence[GPUInfo],
    server_env: Mapping[str, str],
    data_source: str | None,
    data_sha256: str | None,
    seed: int | None,
    *,
    weights_sha256: dict[str, str] | None = None,
    stand_ins_sha256: dict[str, str] | None = None,
    test_patches_sha256: dict[str, str] | None = None,
) -> Provenance:
    sha, dirty = harness_git()
    versions = dict(facts.versions) if facts is not None else {}
    model, isa = cpu_info()
    return Provenance(
        harness_version=__version__,
        harness_git_sha=sha,
        harness_git_dirty=dirty,
        python=sys.version.split()[0],
        platform=platform.platform(),
        hostname=socket.gethostname(),
        cpu=model,
        cpu_isa=isa,
        cpu_count=os.cpu_count(),
        torch=versions.get("torch"),
        transformers=versions.get("transformers"),
        cuda=facts.cuda if facts is not None else None,
        driver=driver_version(),
        gpus=list(gpus),
        data_source=data_source,
        data_sha256=data_sha256,
        seed=seed,
        argv=redact_argv(sys.argv, own=True),  # the harness's own flags
        env=safe_env({**os.environ, **server_env}, server_env.keys()),
        weights_sha256=weights_sha256,
        stand_ins_sha256=stand_ins_sha256,
        test_patches_sha256=test_patches_sha256,
    )
