"""Preflight: the GPU inventory (simulated, nvidia-smi, none) and whether a topology fits."""

from __future__ import annotations

import json
import os
import shutil
import stat
from collections.abc import Callable
from pathlib import Path

import pytest

from harness.errors import BadInput
from harness.results.record import GPUInfo
from harness.run.preflight import check_fit, gpu_inventory
from harness.suite.model import load_suite
from harness.suite.serving import Topology

GEMMA_TOPOLOGY = Topology(gpus=2, gpu_types=["H100", "H200"], min_memory_gib=80, tp_size=2)


def _names(gpus: list[GPUInfo]) -> list[tuple[int, str, float]]:
    return [(g.index, g.name, g.memory_gib) for g in gpus]


def test_compact_inventory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HARNESS_GPU_INVENTORY", "4xH100:80")
    assert _names(gpu_inventory()) == [(i, "H100", 80.0) for i in range(4)]


def test_compact_inventory_several_groups(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HARNESS_GPU_INVENTORY", "2xH100:80,1xA100:40")
    assert _names(gpu_inventory()) == [(0, "H100", 80.0), (1, "H100", 80.0), (2, "A100", 40.0)]


def test_compact_inventory_spacing_and_no_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HARNESS_GPU_INVENTORY", " 2 x H200 , 1xL4:23.5 ")
    assert _names(gpu_inventory()) == [(0, "H200", 0.0), (1, "H200", 0.0), (2, "L4", 23.5)]


def test_empty_inventory_means_no_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HARNESS_GPU_INVENTORY", "")
    assert gpu_inventory() == []


@pytest.mark.parametrize(
    "spec", ["H100", "4xH100:lots", "four x H100", "4x", "-1xH100", "4xH100:80:1"]
)
def test_bad_compact_inventory(monkeypatch: pytest.MonkeyPatch, spec: str) -> None:
    monkeypatch.setenv("HARNESS_GPU_INVENTORY", spec)
    with pytest.raises(BadInput) as caught:
        gpu_inventory()
    assert "HARNESS_GPU_INVENTORY" in caught.value.message
    assert "expected COUNTxMODEL[:GiB] such as 4xH100:80" in caught.value.message


def test_json_inventory(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    path = tmp_path / "gpus.json"
    path.write_text(json.dumps([
        {"index": 3, "name": "NVIDIA H100 80GB HBM3", "memory_gib": 79.6, "uuid": "GPU-a"},
        {"index": 5, "name": "NVIDIA A100-SXM4-40GB", "memory_gib": 40},
    ]))
    monkeypatch.setenv("HARNESS_GPU_INVENTORY", str(path))
    gpus = gpu_inventory()
    assert _names(gpus) == [(3, "NVIDIA H100 80GB HBM3", 79.6), (5, "NVIDIA A100-SXM4-40GB", 40.0)]
    assert gpus[0].uuid == "GPU-a"


@pytest.mark.parametrize("content", ["not json", '{"index": 0}', "[{\"name\": \"H100\"}]", "5"])
def test_bad_json_inventory(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, content: str) -> None:
    path = tmp_path / "gpus.json"
    path.write_text(content)
    monkeypatch.setenv("HARNESS_GPU_INVENTORY", str(path))
    with pytest.raises(BadInput, match="cannot read GPU inventory"):
        gpu_inventory()


def test_missing_json_inventory(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HARNESS_GPU_INVENTORY", str(tmp_path / "absent.json"))
    with pytest.raises(BadInput, match=r"absent\.json"):
        gpu_inventory()


def test_no_nvidia_smi_means_no_gpus(no_gpus: None) -> None:
    assert gpu_inventory() == []


def _fake_nvidia_smi(folder: Path) -> None:
    script = folder / "nvidia-smi"
    script.write_text(
        "#!/bin/sh\n"
        'case "$*" in\n'
        '  *--query-gpu=index,name,memory.total,uuid*) printf "%s" "$FAKE_SMI_OUT" ;;\n'
        '  *driver_version*) echo "550.54.15" ;;\n'
        "  *) exit 9 ;;\n"
        "esac\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


@pytest.fixture
def fake_smi(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Callable[[str], None]:
    if shutil.which("sh") is None:
        pytest.skip("needs /bin/sh for the fake nvidia-smi")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _fake_nvidia_smi(bin_dir)
    monkeypatch.delenv("HARNESS_GPU_INVENTORY", raising=False)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")

    def set_output(csv: str) -> None:
        monkeypatch.setenv("FAKE_SMI_OUT", csv)

    return set_output


# nvidia-smi reports usable memory in MiB: an 80 GB H100 shows 81559 MiB (79.6 GiB),
# an H200 143771 MiB, an 80 GB A100 81920 MiB.
H100_SMI = ("0, NVIDIA H100 80GB HBM3, 81559, GPU-0a\n"
            "1, NVIDIA H100 80GB HBM3, 81559, GPU-1b\n")


def test_nvidia_smi_inventory(fake_smi: Callable[[str], None]) -> None:
    fake_smi(H100_SMI + "2, NVIDIA A100-SXM4-80GB, 81920, GPU-2c\n")
    gpus = gpu_inventory()
    assert _names(gpus) == [(0, "NVIDIA H100 80GB HBM3", 79.6), (1, "NVIDIA H100 80GB HBM3", 79.6),
                            (2, "NVIDIA A100-SXM4-80GB", 80.0)]
    assert [g.uuid for g in gpus] == ["GPU-0a", "GPU-1b", "GPU-2c"]


def test_gemma_fits_two_real_80gb_h100s(fake_smi: Callable[[str], None]) -> None:
    # The gemma suite's gate runs on 2 x H100 80GB; as nvidia-smi reports them they must fit.
    fake_smi(H100_SMI)
    gemma = load_suite("gemma4_dflash_31b").suite.topology
    fit = check_fit(gemma, gpu_inventory())
    assert fit.fits, fit.reason
    assert fit.devices == (0, 1)


def test_check_fit_no_gpu_needed() -> None:
    fit = check_fit(Topology(gpus=0), [])
    assert fit.fits and fit.reason == "needs no GPU" and fit.devices == ()


def _gpus(*specs: tuple[str, float]) -> list[GPUInfo]:
    return [GPUInfo(index=i, name=name, memory_gib=mem) for i, (name, mem) in enumerate(specs)]


def test_check_fit_none_found() -> None:
    fit = check_fit(GEMMA_TOPOLOGY, [])
    assert not fit.fits
    assert fit.reason == "needs 2 x H100/H200 with >= 80 GiB, found 0 (GPUs here: none)"


def test_check_fit_filters_type_and_memory() -> None:
    gpus = _gpus(("NVIDIA A100-SXM4-80GB", 80), ("NVIDIA H100 PCIe", 40), ("NVIDIA H200", 141))
    fit = check_fit(GEMMA_TOPOLOGY, gpus)
    assert not fit.fits
    assert fit.reason.startswith("needs 2 x H100/H200 with >= 80 GiB, found 1 (GPUs here: ")
    assert "NVIDIA A100-SXM4-80GB" in fit.reason
    gpus.append(GPUInfo(index=7, name="H100", memory_gib=80))
    fit = check_fit(GEMMA_TOPOLOGY, gpus)
    assert fit.fits and fit.devices == (2, 7)
    assert fit.reason == "uses 2 x H100/H200: devices [2, 7]"


def test_check_fit_any_type_and_case() -> None:
    topology = Topology(gpus=1)
    fit = check_fit(topology, _gpus(("Tesla T4", 15)))
    assert fit.fits and fit.devices == (0,)
    assert check_fit(Topology(gpus=1, gpu_types=["h100"]), _gpus(("NVIDIA H100", 80))).fits
    no_memory = check_fit(Topology(gpus=2, gpu_types=["A100"]), _gpus(("A100", 40)))
    assert no_memory.reason == "needs 2 x A100, found 1 (GPUs here: A100)"


def test_check_fit_allowed_devices() -> None:
    gpus = _gpus(*[("H100", 80)] * 4)
    assert check_fit(GEMMA_TOPOLOGY, gpus, allowed=[1, 3]).devices == (1, 3)
    assert check_fit(GEMMA_TOPOLOGY, gpus, allowed=[0, 1, 2, 3]).devices == (0, 1)
    fit = check_fit(GEMMA_TOPOLOGY, gpus, allowed=[2])
    assert not fit.fits and "found 1" in fit.reason
    assert not check_fit(GEMMA_TOPOLOGY, gpus, allowed=[]).fits
    assert not check_fit(GEMMA_TOPOLOGY, gpus, allowed=[8, 9]).fits  # not on this host
