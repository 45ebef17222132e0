"""`[gate]`: the paired relative gate of a suite (harness.metrics.paired_gate).

    [gate]
    against = "sglang==0.5.23"   # the reference build (default of `harness run --against`)
    relative_drop = 0.02         # or absolute_drop = 0.1 (accept-length units)
    metric = "server_avg"        # the floors' definition (default: floors.metric)
    alpha = 0.05                 # P(pass | B worse than A by exactly the tolerance)
    beta = 0.2                   # P(not shown "not worse" | B equal to A) sized for
    inconclusive = "fail"        # how a finding that is neither is judged

The floors stay an absolute backstop: a run paired against A is judged by both.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from harness.suite.entries import Metric


class Gate(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    against: str | None = Field(default=None, min_length=1)
    relative_drop: float | None = Field(default=None, gt=0.0, lt=1.0)
    absolute_drop: float | None = Field(default=None, gt=0.0)
    metric: Metric | None = None  # None: the floors' metric
    alpha: float = Field(default=0.05, gt=0.0, lt=0.5)
    beta: float = Field(default=0.2, gt=0.0, lt=0.5)
    inconclusive: Literal["fail", "pass"] = "fail"
    # Where the tolerance (and the floors) came from: a `harness calibrate` record id, or
    # a sentence saying they are external; `harness show` prints it.
    calibration: str | None = Field(default=None, min_length=1)

    @model_validator(mode="after")
    def _one_tolerance(self) -> Gate:
        if (self.relative_drop is None) == (self.absolute_drop is None):
            raise ValueError("[gate] needs exactly one of relative_drop and absolute_drop")
        return self
