"""The reference engine's planted drift: `REFERENCE_DRAFT_NOISE_DRIFT`, the draft-noise
rate added per second of serving (from the decoder's first request, the warm-up's), read
from the server's environment when its decoder is made (as the forced-acceptance knob,
`forced.py`).

A request's noise rate is `min(1, draft_noise + drift x seconds since the decoder's first
request)`, fixed when the request starts (each decoding worker keeps its own clock); a
higher rate spoils a superset of the draft's positions (`draft_noise.DraftNoise`), so accept
length falls with serving time, as EAGLE's does over hours with prefix caching
(vllm-project/vllm #41838). It exists so that `harness soak`'s drift gate is shown to fail
on a real fall and pass without it; unset or 0 is off (the engine as it always was).

Light: no torch here; `decoding.py` applies it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from reference_engine.environment import number_from

DRIFT_ENV = "REFERENCE_DRAFT_NOISE_DRIFT"


def from_environment(environ: Mapping[str, str]) -> float:
    """The drift per second as the server's environment sets it (0.0: off); ValueError
    naming the variable for a value the engine cannot use."""
    return number_from(environ, DRIFT_ENV, high=math.inf,
                       meaning="the noise rate added per second is a finite number >= 0")


def rate_after(base: float, drift_per_s: float, seconds: float) -> float:
    """The noise rate `seconds` after the decoder's first request, in [0, 1]."""
    return min(1.0, base + drift_per_s * max(seconds, 0.0))
