"""`[soak]`: drift over serving time (`harness soak`, harness.protocols.soak).

    [soak]
    duration_s = 600.0     # how long the workload repeats on one server
    window_s = 60.0        # each window of serving time (at least two in the duration)
    max_drift = 0.05       # tolerated fall of accept length over the run, a share of it
    alpha = 0.05           # one-sided level of each side of the test
    inconclusive = "pass"  # how a finding that is neither is judged

`harness soak SUITE --duration 10m --window 1m --max-drift 0.05` overrides each.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

MAX_DURATION_S = 7 * 24 * 3600.0  # a week: beyond any soak a person waits for
MAX_WINDOWS = 10_000


def window_problem(duration_s: float, window_s: float) -> str | None:
    """Why a window cannot cut a duration into at least two windows (None: it can)."""
    if window_s > duration_s:
        return f"the window ({window_s:g} s) is longer than the duration ({duration_s:g} s)"
    windows = math.ceil(duration_s / window_s - 1e-9)
    if windows < 2:
        return (f"the window ({window_s:g} s) makes one window of the duration "
                f"({duration_s:g} s): a trend needs at least two")
    if windows > MAX_WINDOWS:
        return f"{windows} windows; at most {MAX_WINDOWS}: lengthen the window"
    return None


class Soak(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    duration_s: float | None = Field(default=None, gt=0.0, le=MAX_DURATION_S)
    window_s: float | None = Field(default=None, gt=0.0, le=MAX_DURATION_S)
    max_drift: float = Field(default=0.05, gt=0.0, lt=1.0)
    alpha: float = Field(default=0.05, gt=0.0, lt=0.5)
    inconclusive: Literal["fail", "pass"] = "pass"

    @model_validator(mode="after")
    def _windows_fit(self) -> Soak:
        if self.duration_s is not None and self.window_s is not None:
            problem = window_problem(self.duration_s, self.window_s)
            if problem is not None:
                raise ValueError(f"window_s: {problem}")
        return self
