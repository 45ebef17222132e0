"""The reference engine's draft-noise knob: a known-size degradation of the draft
(`engine.draft_noise`, a build's `noise=`), and its planted drift with serving time
(`noise_drift.py`). `decoding.py` applies it.

Light: no torch here, so what reads the knob (the tests of its drift among them) does not
import the model code.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from reference_engine.noise_drift import rate_after


@dataclass(frozen=True)
class DraftNoise:
    """Known-size degradation of the draft: each proposed token is spoiled with probability
    `rate`.

    Greedy: the spoiled token is replaced by a different token, so it is never accepted.
    Sampled: the proposal becomes the mixture (1 - rate) q + rate * uniform, and that mixture
    is what rejection sampling sees, so outputs keep the target's distribution exactly.
    Whether a position is spoiled depends only on (seed, request, absolute position): raising
    `rate` spoils a superset of positions, so accept length falls monotonically in
    expectation (per prompt the path can differ, so tests check aggregates).
    """

    rate: float = 0.0
    seed: int = 0  # the server's --seed; it also seeds every request's sampling generator
    # REFERENCE_DRAFT_NOISE_DRIFT (`noise_drift.py`): rate added per second of serving
    drift_per_s: float = 0.0

    def rate_after(self, seconds: float) -> float:
        """The rate of a request starting `seconds` after the decoder's first request."""
        if self.drift_per_s <= 0:
            return self.rate
        return rate_after(self.rate, self.drift_per_s, seconds)

    def uniform(self, request_key: str, position: int) -> random.Random:
        return random.Random(f"{self.seed}:{request_key}:{position}")
