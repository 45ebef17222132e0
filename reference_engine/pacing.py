"""The reference engine's forward pacing: `REFERENCE_TARGET_FORWARD_S`, the least time each
target forward takes (its prefill and every verify step), read from the server's
environment when its decoder is made (as the planted drift, `noise_drift.py`).

The tiny models' forward takes a few milliseconds on CPU, so a short answer is written in
less time than a busy client takes to wake: its chunks reach the client together, the
answer has a TPOT of 0, and a speed figure has no ratio. A forward that takes as long as a
larger model's spaces the chunks out, and makes the target alone's per-token cost and
speculation's per-step cost what a real deployment's are (a forward dominates both), so
speed tests on a loaded machine measure what they mean to. The accepted tokens, the
counts and the outputs do not change. Unset or 0 is off (the engine as it always was).

Light: no torch here; `decoding.py` applies it.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from reference_engine.environment import number_from

FORWARD_ENV = "REFERENCE_TARGET_FORWARD_S"
MAX_FORWARD_S = 10.0  # a forward paced past this is a typo, not a model


def from_environment(environ: Mapping[str, str]) -> float:
    """The least seconds a target forward takes as the server's environment sets it (0.0:
    off); ValueError naming the variable for a value the engine cannot use."""
    return number_from(environ, FORWARD_ENV, high=MAX_FORWARD_S,
                       meaning="the seconds a target forward takes at least are a number "
                               f"from 0 to {MAX_FORWARD_S:g}")


def hold_until(started: float, least_s: float) -> None:
    """Sleep until `least_s` seconds after `started` (time.perf_counter()); at once when
    the work took that long already."""
    left = least_s - (time.perf_counter() - started)
    if left > 0:
        time.sleep(left)
