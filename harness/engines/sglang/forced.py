"""SGLang's forced acceptance: `SGLANG_SIMULATE_ACC_LEN` (a float; < 0 is off), read once
at import from the environment of the server process (`srt/environ.py`:
`SGLANG_SIMULATE_ACC_LEN = EnvFloat(-1)`, `SGLANG_SIMULATE_ACC_METHOD =
EnvStr("match-expected")`, `SGLANG_SIMULATE_ACC_TOKEN_MODE = EnvStr("fixed")`), so it is
set on launch, one launch per accept length.

DFLASH: `srt/speculative/dflash_worker_v2.py` calls
`dflash_utils.apply_dflash_simulated_acceptance` ("Forces the DFlash acceptance length")
after its verify when the value is above 0; `spec_utils.sample_simulated_acc_len` draws
each step's committed length, clamped to [1, block size], "match-expected" choosing the
floor or the ceiling of the value with the weights that keep its mean. EAGLE, EAGLE3 and
NEXTN read it in `eagle_utils.py`'s verify, and STANDALONE through its EAGLEWorkerV2 base
(`standalone_worker_v2.py`). "real-draft-token" commits the draft's own
tokens and the target's next token (the default "fixed" writes token id 100 instead).

First release: every wheel checked, 0.5.17 to 0.5.23, reads it in dflash_worker_v2.py
(tests/engines/sglang/test_forced_knob_release.py greps each wheel); 0.5.17 is the oldest
release the project holds, so an older build is refused as not known to have it.
"""

from __future__ import annotations

from harness.engines.forced_knob import ForcedKnob

KNOB = ForcedKnob(
    engine="sglang",
    carrier="environment",
    length_name="SGLANG_SIMULATE_ACC_LEN",
    fixed=(("SGLANG_SIMULATE_ACC_METHOD", "match-expected"),
           ("SGLANG_SIMULATE_ACC_TOKEN_MODE", "real-draft-token")),
    algorithms=frozenset({"DFLASH", "EAGLE", "EAGLE3", "NEXTN", "STANDALONE"}),
    first_release="0.5.17",
    source="sglang/srt/speculative/dflash_worker_v2.py (apply_dflash_simulated_acceptance, "
           "dflash_utils.py) and eagle_utils.py, from sglang/srt/environ.py",
)
