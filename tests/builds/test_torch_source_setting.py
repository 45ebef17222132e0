"""Issue 31: the SGLang CPU build's torch wheel source is a setting (`HARNESS_TORCH_INDEX`:
an index URL or a folder of wheels), part of the build's identity when set."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness import builds
from harness.builds.sglang_cpu import CPU_TORCH, TORCH_INDEX_ENV, torch_source_args


def test_the_setting_becomes_pip_arguments(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(TORCH_INDEX_ENV, raising=False)
    assert torch_source_args() == []
    monkeypatch.setenv(TORCH_INDEX_ENV, "https://download.pytorch.org/whl/cpu")
    assert torch_source_args() == ["--extra-index-url", "https://download.pytorch.org/whl/cpu"]
    monkeypatch.setenv(TORCH_INDEX_ENV, str(tmp_path))
    assert torch_source_args() == ["--find-links", str(tmp_path)]
    (tmp_path / "torch").mkdir()  # a folder laid out as a simple index is an index
    assert torch_source_args() == ["--extra-index-url", str(tmp_path)]


def test_a_torch_source_is_its_own_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = builds.parse_build_spec("sglang==0.5.23")
    monkeypatch.setenv("HARNESS_SGLANG_DEVICE", "cpu")
    monkeypatch.delenv(TORCH_INDEX_ENV, raising=False)
    plain = builds.resolve_build(spec)
    assert "torch_source" not in plain.identity  # unset: the cache key as before
    monkeypatch.setenv(TORCH_INDEX_ENV, "https://download.pytorch.org/whl/cpu")
    indexed = builds.resolve_build(spec)
    assert indexed.key != plain.key
    assert indexed.identity["torch_source"] == "https://download.pytorch.org/whl/cpu"


def _wheel(folder: Path, version: str) -> None:
    """A minimal wheel of `torch` at `version` (metadata only: pip resolves, never installs)."""
    import zipfile

    folder.mkdir(parents=True, exist_ok=True)
    info = f"torch-{version}.dist-info"
    with zipfile.ZipFile(folder / f"torch-{version}-py3-none-any.whl", "w") as wheel:
        wheel.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: torch\n"
                                           f"Version: {version}\n")
        wheel.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\n"
                                        "Root-Is-Purelib: true\nTag: py3-none-any\n")
        wheel.writestr(f"{info}/RECORD", "")


def test_pip_takes_the_cpu_build_from_the_setting(tmp_path: Path) -> None:
    """PyPI's torch (the CUDA build) and the setting's `+cpu` build both offered: pip
    takes the CPU one. Without the setting it would take PyPI's (resolved, not installed;
    pip's own configuration set aside)."""
    pypi, cpu = tmp_path / "pypi", tmp_path / "cpu"
    _wheel(pypi, "2.13.0")
    _wheel(cpu, "2.13.0+cpu")
    env = {**os.environ, "PIP_CONFIG_FILE": os.devnull, "PIP_FIND_LINKS": ""}

    def chosen(*source: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "pip", "install", "--dry-run", "--no-deps", "--no-index",
             "--ignore-installed", "--quiet", "--report", "-", "--find-links", str(pypi),
             *source, CPU_TORCH], capture_output=True, text=True, env=env, timeout=300,
            check=True)
        [install] = json.loads(done.stdout)["install"]
        return install["metadata"]["version"]

    assert chosen() == "2.13.0"  # what a host with only PyPI gets
    assert chosen(*torch_source_args(str(cpu))) == "2.13.0+cpu"
