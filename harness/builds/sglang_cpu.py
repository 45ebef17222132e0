"""SGLang on a host without a GPU: the CPU engine environment of a released build.

A release's wheel pins a CUDA torch and CUDA-only kernel libraries (0.5.23: `torch==2.14.1`,
`sglang-kernel==0.4.10`, flashinfer, ...); installed as they are, the server cannot start
on a CPU. The CPU recipe installs instead

1. the CPU torch (`torch==2.13.0`, which the machine's wheel mirror serves as `+cpu`) and
   triton (SGLang imports it at module level; without a GPU backend it only decorates),
2. every other requirement the wheel's own metadata (`Requires-Dist`) states for this
   interpreter and platform, minus the CUDA-only ones (`cuda_only`, the one rule), with
   torch held to the CPU pin by a constraint so no dependency swaps it for a CUDA build,
3. sglang itself with `--no-deps` (so its CUDA pins are never resolved),

then removes the torch companions a dependency may have pulled in (torchvision from
timm, ...): PyPI builds them against CUDA torch and they fail at import on the CPU one.
The engine runs with `SGLANG_USE_CPU_ENGINE=1` (`cpu_engine_env`); without it SGLang's
`is_cpu()` is false. The dependency list is read from the wheel each time it is built, so
it follows the release and never drifts from a hand-kept list.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import zipfile
from collections.abc import Sequence
from email.parser import Parser
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from harness.builds.common import install_timeout, run_command
from harness.errors import EngineError

DEVICE_ENV = "HARNESS_SGLANG_DEVICE"  # "cpu" or "cuda": overrides the host's own answer
CPU_TORCH = "torch==2.13.0"
CPU_TRITON = "triton==3.9.0"
RECIPE = "sglang-cpu-1"  # part of the build's identity: a changed recipe is a new env
CPU_ENGINE_ENV = {"SGLANG_USE_CPU_ENGINE": "1"}
# Where the CPU torch wheel comes from: a package index (https://download.pytorch.org/whl/cpu)
# or a local folder of wheels. Unset, pip's own configuration decides; on a host whose pip
# knows only PyPI, `torch==2.13.0` is then PyPI's CUDA build with its NVIDIA runtime
# wheels (several GB), which runs on a CPU but costs that download and disk.
TORCH_INDEX_ENV = "HARNESS_TORCH_INDEX"


def torch_source() -> str | None:
    """The CPU torch wheel's source (`HARNESS_TORCH_INDEX`), None for pip's own."""
    return os.environ.get(TORCH_INDEX_ENV, "").strip() or None


def torch_source_args(source: str | None = None) -> list[str]:
    """pip arguments that make `source` (an index URL, or a folder of wheels) offer the
    CPU torch: an extra index or find-links. PEP 440 ranks `2.13.0+cpu` above `2.13.0`,
    so with both offered pip takes the CPU build."""
    source = source if source is not None else torch_source()
    if not source:
        return []
    if "://" not in source or source.startswith("file://"):
        folder = Path(source.removeprefix("file://")).expanduser()
        if folder.is_dir() and not (folder / "index.html").exists() and \
                not (folder / "torch").is_dir():
            return ["--find-links", str(folder)]
    return ["--extra-index-url", source]

# The CUDA-only rule. A requirement is left out when its distribution is
# - the torch family (torch is the CPU pin above; torchvision/torchaudio/torchcodec
#   are built against CUDA torch, and a text model needs none of them),
# - NVIDIA's CUDA runtime or tooling (`nvidia-*`, `cuda-*`, any `*-cu<N>` name, or a
#   requirement that selects a `cu<N>` extra),
# - a GPU kernel library: its wheels are CUDA/ROCm binaries with no CPU build.
# (One exception: nvidia-ml-py, below.)
TORCH_FAMILY = frozenset({"torch", "torchvision", "torchaudio", "torchcodec"})
GPU_KERNEL_LIBRARIES = frozenset({
    "sglang-kernel", "sgl-kernel", "sgl-deep-ep", "sgl-deep-gemm", "sgl-flash-mla",
    "flashinfer-python", "flashinfer-cubin", "flashinfer-jit-cache", "flash-attn",
    "flash-attn-4", "quack-kernels", "tilelang", "humming-kernels", "torch-memory-saver",
    "nvshmem4py", "cupy",
})
_CUDA_NAME = re.compile(r"^(nvidia|cuda)-|-cu\d+$")
# NVML's binding is pure Python (it answers "no GPU" on a CPU host) and SGLang imports it.
PURE_PYTHON_NVIDIA = frozenset({"nvidia-ml-py"})
_CUDA_EXTRA = re.compile(r"^cu\d+$")


def host_device() -> str:
    """"cuda" when this host has an NVIDIA GPU (or `HARNESS_SGLANG_DEVICE` says so)."""
    forced = os.environ.get(DEVICE_ENV, "").strip().lower()
    if forced in ("cpu", "cuda"):
        return forced
    has_gpu = shutil.which("nvidia-smi") is not None or Path("/dev/nvidiactl").exists()
    return "cuda" if has_gpu else "cpu"


def cuda_only(requirement: str) -> bool:
    """Whether a `Requires-Dist` line names a CUDA-only distribution (see the rule above)."""
    parsed = Requirement(requirement)
    name = canonicalize_name(parsed.name)
    if name in PURE_PYTHON_NVIDIA:
        return False
    return (name in TORCH_FAMILY or name in GPU_KERNEL_LIBRARIES
            or bool(_CUDA_NAME.search(name))
            or any(_CUDA_EXTRA.match(extra) for extra in parsed.extras))


def wheel_requirements(wheel: Path) -> list[str]:
    """The wheel's `Requires-Dist` lines that apply here (no extra, markers true)."""
    with zipfile.ZipFile(wheel) as archive:
        names = [n for n in archive.namelist()
                 if n.count("/") == 1 and n.endswith(".dist-info/METADATA")]
        if len(names) != 1:
            raise EngineError(f"{wheel.name} has no single .dist-info/METADATA")
        metadata = Parser().parsestr(archive.read(names[0]).decode())
    return applicable(metadata.get_all("Requires-Dist") or [])


def applicable(lines: Sequence[str]) -> list[str]:
    """The requirements that apply to this interpreter and platform (no extra)."""
    wanted = []
    for line in lines:
        requirement = Requirement(line)
        if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
            wanted.append(line)
    return wanted


def cpu_dependencies(wheel: Path) -> tuple[list[str], list[str]]:
    """(kept, left out) of the wheel's applicable requirements, by the CUDA-only rule."""
    return split_cuda_only(wheel_requirements(wheel))


def split_cuda_only(lines: Sequence[str]) -> tuple[list[str], list[str]]:
    """(kept, left out) of applicable requirement lines, markers dropped (evaluated)."""
    kept: list[str] = []
    left_out: list[str] = []
    for line in lines:
        (left_out if cuda_only(line) else kept).append(_without_marker(line))
    return kept, left_out


def _without_marker(line: str) -> str:
    requirement = Requirement(line)
    requirement.marker = None  # already evaluated for this interpreter
    return str(requirement)


def install_cpu_sglang(pip: Sequence[str], python: Path, requirement: str, scratch: Path,
                       pip_args: Sequence[str], what: str) -> dict[str, object]:
    """Install `requirement` (a released sglang) the CPU way into the environment of
    `python`; `pip` is the pip command that installs there. Returns what was installed."""
    scratch.mkdir(parents=True, exist_ok=True)
    quiet = ["--quiet", "--no-input", "--disable-pip-version-check"]
    env = {**os.environ, "PIP_NO_INPUT": "1"}
    timeout = install_timeout()
    hint = "HARNESS_INSTALL_TIMEOUT_S sets the limit"
    run_command([*pip, "download", *quiet, "--no-deps", "--dest", str(scratch), *pip_args,
                 requirement], f"downloading {requirement} ({what})", timeout_s=timeout,
                env=env, timeout_hint=hint)
    wheels = sorted(scratch.glob("sglang-*.whl"))
    if len(wheels) != 1:
        raise EngineError(f"{what}: pip download {requirement} gave no single sglang wheel "
                          f"in {scratch} (a CPU build installs a released wheel)")
    kept, left_out = cpu_dependencies(wheels[0])
    constraints = scratch / "cpu-constraints.txt"
    constraints.write_text(f"{CPU_TORCH}\n")
    run_command([*pip, "install", *quiet, "--constraint", str(constraints), *pip_args,
                 *torch_source_args(), CPU_TORCH, CPU_TRITON, *kept],
                f"pip install (CPU torch and sglang's non-CUDA dependencies, {what})",
                timeout_s=timeout, env=env, timeout_hint=hint)
    run_command([*pip, "install", *quiet, "--no-deps", *pip_args, str(wheels[0])],
                f"pip install --no-deps {wheels[0].name} ({what})", timeout_s=timeout,
                env=env, timeout_hint=hint)
    pulled = _installed(python, TORCH_FAMILY - {"torch"})
    if pulled:
        run_command([*pip, "uninstall", "--yes", "--quiet", *pulled],
                    f"removing CUDA builds of {', '.join(pulled)} ({what})",
                    timeout_s=300, env=env)
    return {"recipe": RECIPE, "wheel": wheels[0].name, "torch": CPU_TORCH,
            "torch_source": torch_source() or "pip's configuration",
            "triton": CPU_TRITON, "dependencies": kept, "left_out_cuda_only": left_out,
            "removed_after_install": pulled, "engine_env": CPU_ENGINE_ENV}


def _installed(python: Path, names: frozenset[str]) -> list[str]:
    script = ("import importlib.metadata as m, sys\n"
              "for n in sys.argv[1:]:\n"
              "    try: m.version(n); print(n)\n"
              "    except m.PackageNotFoundError: pass\n")
    out = run_command([str(python), "-c", script, *sorted(names)], "listing torch companions",
                      timeout_s=120, cwd=Path(sys.prefix))
    return [line.strip() for line in out.splitlines() if line.strip()]
