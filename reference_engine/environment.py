"""The engine's knobs read from the server's environment (`noise_drift.py`, `pacing.py`):
one rule for reading a number, so every knob refuses a bad value the same way.

Light: no torch here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping


def number_from(environ: Mapping[str, str], name: str, *, high: float, meaning: str) -> float:
    """The value of `name` in `environ`, a finite number from 0 to `high` (0.0 when unset
    or empty: the knob is off); ValueError naming the variable, its value and `meaning`
    (what the number is) for anything else."""
    text = environ.get(name, "").strip()
    if not text:
        return 0.0
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{name}={text!r} is not a number") from None
    if not math.isfinite(value) or not 0 <= value <= high:
        raise ValueError(f"{name}={text!r}: {meaning}")
    return value
