"""End to end on CPU: reference-engine suites under `pytest --suites ... -n 3`.

A simulated inventory of 4 GPUs; three 1-GPU reference suites (each leases a device
and hands it to the engine as CUDA_VISIBLE_DEVICES) and one suite needing 8 GPUs
(skipped with its reason). Needs the reference engine and the tiny CPU suite.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
import tomli_w

from harness.builds import has_reference_dependencies
from harness.ci.gpu_allocator import read_lease_log

pytestmark = [pytest.mark.slow, pytest.mark.e2e]  # nox -s e2e

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "suites" / "tiny_dflash_cpu.toml"


def _suite_text(document: dict[str, Any]) -> str:
    return tomli_w.dumps(document)


def _find(data: Any, key: str) -> list[Any]:
    if isinstance(data, dict):
        found = [data[key]] if key in data else []
        return found + [hit for value in data.values() for hit in _find(value, key)]
    if isinstance(data, list):
        return [hit for value in data for hit in _find(value, key)]
    return []


def test_reference_suites_run_in_parallel_on_disjoint_gpus(tmp_path: Path) -> None:
    if not has_reference_dependencies(sys.executable):
        pytest.skip("this environment lacks the reference extra (pip install -e '.[reference]')")
    tiny = tomllib.loads(TINY.read_text())
    suites = tmp_path / "suites"
    suites.mkdir()
    for index in range(3):
        document = {**tiny, "name": f"ref_parallel_{index}"}
        document["topology"] = {"gpus": 1, "tp_size": 1}
        workload = dict(document.get("workload", {}))
        workload["questions"] = min(int(workload.get("questions", 8)), 8)
        document["workload"] = workload
        # 8 prompts give a wide CI: this test is about scheduling, so the floor is lenient
        document["floors"] = {**document["floors"], "accept_length": 1.5}
        (suites / f"ref_parallel_{index}.toml").write_text(_suite_text(document))
    too_big = {**tiny, "name": "ref_needs_8", "topology": {"gpus": 8, "tp_size": 8}}
    (suites / "ref_needs_8.toml").write_text(_suite_text(too_big))

    lock_dir, results, junit = tmp_path / "locks", tmp_path / "results", tmp_path / "junit.xml"
    # the simulated GPUs are leased; the engine computes on the CPU (a gpus = 1 suite
    # launches it with --device cuda, which a CPU torch refuses)
    env = {**os.environ, "HARNESS_GPU_INVENTORY": "4xH100:80",
           "HARNESS_GPU_LOCK_DIR": str(lock_dir),
           "HARNESS_REFERENCE_DEVICE": "cpu"}  # fmt: skip
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--suites", str(suites),
               "-n", "3", "--results-dir", str(results), f"--junitxml={junit}", "-rsf"]  # fmt: skip
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=1800)  # fmt: skip
    output = done.stdout + done.stderr

    cases = {case.get("name"): case for case in ET.parse(junit).iter("testcase")}
    assert set(cases) == {"ref_parallel_0", "ref_parallel_1", "ref_parallel_2", "ref_needs_8"}
    skipped = cases["ref_needs_8"].find("skipped")
    assert skipped is not None and "needs 8 x" in skipped.get("message", ""), output
    for index in range(3):
        case = cases[f"ref_parallel_{index}"]
        assert case.find("skipped") is None and case.find("error") is None, output
        assert case.find("failure") is None, output  # the reference engine meets its floor

    # the allocator's log: three workers, and leases held at the same time never share a GPU
    spans: dict[str, dict[str, Any]] = {}
    for event in read_lease_log(lock_dir):
        spans.setdefault(event["lease"], {}).update({event["event"]: event["time"], **event})
    leases = list(spans.values())
    assert len(leases) == 3 and all("released" in lease for lease in leases)
    assert len({lease["owner"].split(":")[0] for lease in leases}) >= 2, leases
    for i, a in enumerate(leases):
        for b in leases[i + 1 :]:
            if a["acquired"] < b["released"] and b["acquired"] < a["released"]:
                assert not set(a["devices"]) & set(b["devices"]), (a, b)

    # what each engine was handed, as its run record says
    devices_by_suite = {lease["owner"].split("::")[-1]: lease["devices"] for lease in leases}
    for run_file in results.glob("runs/*/*/run.json"):
        record = json.loads(run_file.read_text())
        seen = _find(record, "cuda_visible_devices") + _find(record, "CUDA_VISIBLE_DEVICES")
        assert seen, f"{run_file}: the record does not say which devices the engine saw"
        expected = ",".join(map(str, devices_by_suite[record["suite"]["name"]]))
        assert str(seen[0]) == expected, (run_file, seen)
