"""The reference engine's device: `cuda` for a suite with gpus = 1, refused (exit 2, one
line, no traceback) where torch has no CUDA, never a fall-back to the CPU; CPU suites'
launch lines unchanged. No model is loaded: the refusal comes before any worker starts."""

from __future__ import annotations

import subprocess
import sys
import types
from pathlib import Path

import pytest

from harness.engines import reference_adapter
from harness.errors import BadInput
from harness.suite.model import load_suite
from reference_engine.loading import DeviceError, check_device

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "reference_engine" / "tiny"
GPU_SUITE = ROOT / "suites" / "tiny_dflash_gpu.toml"
CPU_SUITE = ROOT / "suites" / "tiny_dflash_cpu.toml"


def _line(suite_path: Path) -> list[str]:
    suite = load_suite(suite_path).suite
    return reference_adapter.launch_command(suite, "python", "127.0.0.1", 30000,
                                            TINY / "target", TINY / "draft")


def test_a_gpu_suite_launches_the_engine_on_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(reference_adapter.DEVICE_ENV, raising=False)
    line = _line(GPU_SUITE)
    assert line[line.index("--device") + 1] == "cuda"
    assert "--device" not in _line(CPU_SUITE)  # a CPU suite's line is as before


def test_the_rehearsal_override_is_on_the_launch_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(reference_adapter.DEVICE_ENV, "cpu")
    line = _line(GPU_SUITE)
    assert line[line.index("--device") + 1] == "cpu"  # said on the line, not hidden
    monkeypatch.setenv(reference_adapter.DEVICE_ENV, "tpu")
    with pytest.raises(BadInput, match="HARNESS_REFERENCE_DEVICE='tpu'"):
        _line(GPU_SUITE)


def test_more_than_one_gpu_and_a_device_flag_are_refused() -> None:
    suite = load_suite(GPU_SUITE).suite
    two = suite.model_copy(update={"topology": suite.topology.model_copy(update={"gpus": 2})})
    with pytest.raises(BadInput, match="one GPU at most"):
        reference_adapter.check_topology(two)
    flagged = suite.model_copy(update={"engine": suite.engine.model_copy(
        update={"extra_args": ["--device", "cpu"]})})
    with pytest.raises(BadInput, match="--device"):
        reference_adapter.check_flags(flagged)


def test_a_server_on_another_device_is_a_mismatch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(reference_adapter.DEVICE_ENV, raising=False)
    suite = load_suite(GPU_SUITE).suite
    info = {"speculative_algorithm": "DFLASH", "speculative_num_draft_tokens": 8,
            "device": "cpu"}
    mismatches = reference_adapter.ADAPTER.settings_mismatches(info, suite)
    assert any("device" in m and "cuda" in m and "cpu" in m for m in mismatches), mismatches
    assert reference_adapter.ADAPTER.settings_mismatches({**info, "device": "cuda"}, suite) == []


def _fake_torch(monkeypatch: pytest.MonkeyPatch, cuda: str | None, available: bool) -> None:
    fake = types.ModuleType("torch")
    fake.__version__ = "2.11.0+fake"
    fake.version = types.SimpleNamespace(cuda=cuda)
    fake.cuda = types.SimpleNamespace(is_available=lambda: available,
                                      get_device_name=lambda index: "NVIDIA H100 80GB HBM3")
    monkeypatch.setitem(sys.modules, "torch", fake)


def test_check_device_refuses_a_torch_without_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    assert check_device("cpu") == {"device": "cpu"}
    _fake_torch(monkeypatch, None, False)
    with pytest.raises(DeviceError, match=r"build without CUDA.*not fall back to the CPU"):
        check_device("cuda")
    _fake_torch(monkeypatch, "13.0", False)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    with pytest.raises(DeviceError, match="sees no CUDA device \\(CUDA_VISIBLE_DEVICES=''\\)"):
        check_device("cuda")
    _fake_torch(monkeypatch, "13.0", True)
    assert check_device("cuda")["cuda_device_name"] == "NVIDIA H100 80GB HBM3"


def test_the_engine_exits_2_without_a_traceback_when_cuda_is_missing() -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this host has CUDA: the engine would serve")
    done = subprocess.run(
        [sys.executable, "-m", "reference_engine", "--target", str(TINY / "target"),
         "--draft", str(TINY / "draft"), "--port", "1", "--device", "cuda"],
        capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.startswith("reference engine: --device cuda: torch "), done.stderr
    assert "not fall back to the CPU" in done.stderr


def test_harness_run_of_the_gpu_suite_without_cuda_errs_with_the_engines_line(
        tmp_path: Path) -> None:
    """The whole path on a host without CUDA: a simulated GPU fits, the engine is launched
    with --device cuda, refuses, and the run ends in exit 3 with the engine's line and a
    record whose provenance says cuda (no CPU run happened)."""
    import json
    import os

    from harness.workloads.gsm8k import default_data_paths

    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this host has CUDA: the engine would serve")
    if not any(Path(p).is_file() for p in default_data_paths()):
        pytest.skip("no local GSM8K test.jsonl (HARNESS_DATA_DIR)")
    env = {**os.environ, "HARNESS_GPU_INVENTORY": "1xH100:80", "PYTHONPATH": str(ROOT),
           "HARNESS_CACHE": str(tmp_path / "cache")}
    env.pop(reference_adapter.DEVICE_ENV, None)
    done = subprocess.run(
        [sys.executable, "-m", "harness", "run", str(GPU_SUITE), "--results",
         str(tmp_path / "results"), "--no-progress", "--no-plot"],
        capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
    output = done.stdout + done.stderr
    assert done.returncode == 3, output
    assert "server exited with code 2" in output and "is a build without CUDA" in output
    assert "Traceback" not in output
    (record_path,) = (tmp_path / "results").rglob("run.json")
    record = json.loads(record_path.read_text())
    assert record["verdict"]["status"] == "error"
    assert record["provenance"]["device"] == "cuda"
    assert [g["name"] for g in record["provenance"]["gpus"]] == ["H100"]
    assert record["launch"]["command"][-2:] == ["--device", "cuda"]
