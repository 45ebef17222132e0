"""ci/gpu/: the pack's wheel selection and size check, and the scripts' properties (strict
bash, nothing fetched, no other harness copy). Fast: nothing is downloaded or run here
but `bash -n`; `test_rehearsal_runs_offline` (e2e) runs the whole rehearsal."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GPU = ROOT / "ci" / "gpu"
SCRIPTS = sorted(GPU.glob("*.sh"))


def _pack():
    spec = importlib.util.spec_from_file_location("gpu_pack", GPU / "pack.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["gpu_pack"] = module
    spec.loader.exec_module(module)
    return module


pack = _pack()


def test_every_harness_dependency_is_on_the_host_packed_or_left_out() -> None:
    requirements = pack.harness_requirements()
    assert "pydantic" in requirements and "dflash" in requirements and "torch" in requirements
    assert pack.unaccounted(requirements) == []
    # a dependency added to pyproject without a word here is caught
    assert pack.unaccounted([*requirements, "Brand-New.pkg"]) == ["Brand-New.pkg"]
    assert pack.unaccounted(requirements, wheels=()) != []  # the host lacks pydantic & co


def test_the_pack_brings_what_the_host_lacks_and_nothing_it_has() -> None:
    packed = {pack.requirement_name(w) for w in pack.WHEELS}
    assert {"pydantic", "pydantic_core", "dflash", "tomli_w"} <= packed
    assert not packed & {pack.canonical(n) for n in pack.HOST_HAS}  # torch & co: the host's
    assert all(re.fullmatch(r"[A-Za-z0-9._-]+==[0-9][0-9A-Za-z.]*", w) for w in pack.WHEELS)


def test_the_download_is_binary_cp312_manylinux_x86_64_and_exactly_the_pins() -> None:
    command = pack.download_command(pack.WHEELS, Path("/tmp/w"))
    assert command[1:4] == ["-m", "pip", "download"]
    assert "--only-binary=:all:" in command and "--no-deps" in command
    assert command[command.index("--python-version") + 1] == "3.12"
    platforms = [command[i + 1] for i, part in enumerate(command) if part == "--platform"]
    assert platforms and all(p.endswith("x86_64") or p == "any" for p in platforms)
    assert "manylinux2014_x86_64" in platforms  # pydantic-core's tag
    assert command[-len(pack.WHEELS):] == list(pack.WHEELS)


def _wheels(folder: Path, names: list[str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        (folder / name).write_bytes(b"PK")
    return folder


def test_check_wheels_names_a_missing_pin_two_versions_and_foreign_wheels(tmp_path: Path
                                                                          ) -> None:
    pins = ("pydantic==2.14.4", "pydantic-core==2.50.5")
    good = ["pydantic-2.14.4-py3-none-any.whl",
            "pydantic_core-2.50.5-cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64.whl"]
    assert pack.check_wheels(_wheels(tmp_path / "good", good), pins) == []
    problems = pack.check_wheels(_wheels(tmp_path / "bad", [
        "pydantic-2.14.4-py3-none-any.whl", "pydantic-2.13.0-py3-none-any.whl",
        "pydantic_core-2.50.5-cp311-cp311-manylinux_2_17_x86_64.whl",
        "numpy-2.5.2-cp312-cp312-macosx_14_0_arm64.whl"]), pins)
    text = "\n".join(problems)
    assert "pydantic: several versions" in text
    assert "not for CPython 3.12 (cp311-cp311)" in text
    assert "not for x86_64 Linux (macosx_14_0_arm64)" in text
    missing = pack.check_wheels(_wheels(tmp_path / "none", []), pins)
    assert missing == [f"{pin}: no wheel in {tmp_path / 'none'}" for pin in pins]


def test_the_size_check_counts_the_pack_and_the_working_tree_together() -> None:
    mib = 2**20
    assert pack.size_problem(20 * mib, 40 * mib) is None
    assert pack.size_problem(30 * mib, 34 * mib) is None  # exactly 64 MiB travels
    problem = pack.size_problem(30 * mib, 34 * mib + 1)
    assert problem is not None and "over the 64 MiB" in problem
    # the working tree alone leaves room for the pack (measured: 21 MiB)
    assert pack.tree_bytes() + 21 * mib <= pack.LIMIT_BYTES


def test_the_pack_and_outputs_are_ignored_so_they_travel_only_when_carried() -> None:
    for path in (".gpu-pack/wheels/x.whl", ".gpu-out/summary.json"):
        ignored = subprocess.run(["git", "check-ignore", "-q", path], cwd=ROOT)
        assert ignored.returncode == 0, path


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_scripts_are_strict_bash_that_parses(script: Path) -> None:
    text = script.read_text()
    assert text.startswith("#!/usr/bin/env bash\n")
    assert re.search(r"^set -euo pipefail$", text, re.M)
    assert os.access(script, os.X_OK)
    parsed = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert parsed.returncode == 0, parsed.stderr


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_scripts_fetch_nothing(script: Path) -> None:
    text = script.read_text()
    for forbidden in ("--index-url", "--extra-index-url", "curl ", "wget ", "http://",
                      "https://", "pip download", "git clone", "huggingface-cli"):
        assert forbidden not in text, (script.name, forbidden)
    for line in re.findall(r"pip install[^\n]*(?:\\\n[^\n]*)*", text):
        assert "--no-index" in line, line


def test_the_host_script_isolates_the_harness_it_runs() -> None:
    text = (GPU / "run_reference_gpu.sh").read_text()
    assert re.search(r"^unset PYTHONPATH\b", text, re.M)
    assert "-m venv --without-pip --system-site-packages" in text
    assert "import harness; print(harness.__file__)" in text
    assert '"$work/venv/"*' in text  # the harness found must be the venv's
    assert "HF_HUB_OFFLINE=1" in text and "PIP_NO_INDEX=1" in text
    assert "tiny_dflash_gpu.toml" in text and "--suites" in text  # both paths: run, allocator
    assert '${OUT:-' in text
    assert "HARNESS_REFERENCE_DEVICE" not in re.sub(r"^#.*$", "", text, flags=re.M).replace(
        'os.environ.get("HARNESS_REFERENCE_DEVICE")', "")  # the host run never sets it


def test_the_rehearsal_says_what_it_changes() -> None:
    text = (GPU / "rehearse.sh").read_text()
    assert "HARNESS_REFERENCE_DEVICE=cpu" in text and "HARNESS_GPU_INVENTORY=1xH100:80" in text
    assert "run_reference_gpu.sh" in text and "unshare" in text


def _torch_python() -> str | None:
    given = os.environ.get("HARNESS_TORCH_PYTHON")
    if given:
        return given
    return sys.executable if importlib.util.find_spec("torch") else None


@pytest.mark.gpu_rehearsal  # `nox -s gpu_rehearsal`, which makes the pack first
@pytest.mark.slow
def test_rehearsal_runs_offline(tmp_path: Path) -> None:
    """ci/gpu/rehearse.sh end to end, offline, with the pack made beforehand (pack.py needs
    the network): two whole suite runs, minutes (`nox -s gpu_rehearsal`)."""
    python = _torch_python()
    if python is None or not (ROOT / ".gpu-pack" / "wheels").is_dir() or \
            shutil.which("unshare") is None:
        pytest.skip("needs a python with torch, the pack (python ci/gpu/pack.py), unshare")
    env = {**os.environ, "HARNESS_TORCH_PYTHON": python, "OUT": str(tmp_path / "out")}
    env.pop("PYTHONPATH", None)
    done = subprocess.run([str(GPU / "rehearse.sh")], env=env, capture_output=True,
                          text=True, timeout=1200)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    assert "no network" in output, output[-2000:]
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["problems"] == [] and summary["expected_device"] == "cpu"
    runs = summary["runs"]
    assert runs["run1"]["verdict"] == runs["run2"]["verdict"] == "pass"
    assert runs["run1"]["accept_length"] == runs["run2"]["accept_length"] >= 3.5
    for run in runs.values():
        assert run["device"] == "cpu" and run["gpus"][0]["name"] == "H100"
        assert run["cuda_visible_devices"] == "0"
        assert run["launch"][run["launch"].index("--device") + 1] == "cpu"
