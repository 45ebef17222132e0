"""The reference engine's forced acceptance, on SGLang's semantics (harness.engines.sglang.
forced): `REFERENCE_SIMULATE_ACC_LEN` (a float; unset or <= 0 is off, as SGLang's) and
`REFERENCE_SIMULATE_ACC_METHOD` ("match-expected", the default, or "multinomial"), read
from the server's environment when its decoder is made.

Each verify step commits a forced count of tokens in [1, block size] instead of the
accepted run plus the bonus: "match-expected" takes the floor or the ceiling of the value,
the ceiling with probability value - floor, so the mean is the value; "multinomial" rounds
a normal draw of mean value and sd 1, clamped to [1, block size]. As SGLang's
"real-draft-token" mode, the committed tokens are the draft's own proposals and then the
target's token at that position. The draws come from the request's key and the step's
position (not a global generator), so a forced run repeats exactly. A plain launch
(`--no-speculation`, block 1) commits one token a step whatever the value.

Light: no torch here; `decoding.py` applies it.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from dataclasses import dataclass

from harness.engines.forced_knob import ForcedKnob

LENGTH_ENV = "REFERENCE_SIMULATE_ACC_LEN"
METHOD_ENV = "REFERENCE_SIMULATE_ACC_METHOD"
METHODS = ("match-expected", "multinomial")

KNOB = ForcedKnob(
    engine="reference",
    carrier="environment",
    length_name=LENGTH_ENV,
    fixed=((METHOD_ENV, "match-expected"),),
    algorithms=frozenset({"DFLASH"}),
    first_release=None,  # part of the engine the project ships
    source="reference_engine/decoding.py (_Run.verify), "
           "reference_engine/forced.py",
)


@dataclass(frozen=True)
class ForcedAcceptance:
    length: float  # tokens a verify step commits, on average
    method: str = "match-expected"

    def committed(self, block_size: int, draw: random.Random) -> int:
        """The tokens this step commits, in [1, block_size]."""
        if self.method == "multinomial":
            value = min(max(draw.gauss(self.length, 1.0), 1.0), float(block_size))
            return round(value)
        value = min(max(self.length, 1.0), float(block_size))
        lower = int(value)
        if lower >= block_size:
            return block_size
        return lower + 1 if draw.random() < value - lower else lower


def from_environment(environ: Mapping[str, str]) -> ForcedAcceptance | None:
    """The knob as the server's environment sets it; None when off. ValueError naming the
    variable for a value the engine cannot use (SGLang raises likewise)."""
    text = environ.get(LENGTH_ENV, "").strip()
    if not text:
        return None
    try:
        length = float(text)
    except ValueError:
        raise ValueError(f"{LENGTH_ENV}={text!r} is not a number") from None
    if not math.isfinite(length):
        raise ValueError(f"{LENGTH_ENV}={text!r} is not a finite number")
    if length <= 0:  # SGLang's `if SIMULATE_ACC_LEN > 0`: 0 and below are off
        return None
    method = environ.get(METHOD_ENV, "match-expected").strip() or "match-expected"
    if method not in METHODS:
        raise ValueError(f"{METHOD_ENV}={method!r}: expected one of {', '.join(METHODS)}")
    return ForcedAcceptance(length, method)
