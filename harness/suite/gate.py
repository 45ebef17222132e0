"""`[gate]`: the paired relative gate of a suite (harness.metrics.paired_gate).

    [gate]
    against = "sglang==0.5.23"   # the reference build (default of `harness run --against`)
    relative_drop = 0.02         # or absolute_drop = 0.1 (accept-length units)
    metric = "server_avg"        # the floors' definition (default: floors.metric)
    alpha = 0.05                 # one-sided level of each side of the test
    beta = 0.2                   # 1 - the power the question count is sized for
    inconclusive = "pass"        # how a finding that is neither is judged (default pass)
    paired_sd = 0.55             # per-question sd of B - A the gate was sized for
                                 # (`harness calibrate`'s paired_sd)

The floors stay an absolute backstop: a run paired against A is judged by both.

Why `inconclusive = "pass"` by default: real engines are not bit-reproducible run to
run, so two launches of the same build differ question by question. With "pass" the gate
fails only on a regression SHOWN beyond the tolerance, and P(fail | B = A) <= alpha at any
spread and any question count (and a drop of twice the tolerance fails with probability
>= 1 - beta once the suite has the questions `harness power` names). With "fail" a build
must show it is not worse, and P(fail | B = A) is 1 - the power: about beta at best, and
most of the time when the gate has too few questions for its spread (7 of 10 A/A pairs of
real SGLang on GSM8K at T = 0.6, issue 27). "fail" is for a gate whose `paired_sd` is
declared and small enough at the suite's question count (the exactly repeatable reference
engine: 0): `harness power` prints the A/A false-alarm rate of either setting.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from harness.suite.entries import Metric, exactly_one


class Gate(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    against: str | None = Field(default=None, min_length=1)
    relative_drop: float | None = Field(default=None, gt=0.0, lt=1.0)
    absolute_drop: float | None = Field(default=None, gt=0.0)
    metric: Metric | None = None  # None: the floors' metric
    alpha: float = Field(default=0.05, gt=0.0, lt=0.5)
    beta: float = Field(default=0.2, gt=0.0, lt=0.5)
    inconclusive: Literal["fail", "pass"] = "pass"
    # The per-question sd of B - A (paired margin) the gate was sized for, from
    # `harness calibrate` (its paired_sd): what `harness power` and the run's
    # "underpowered" check use. None: not sized.
    paired_sd: float | None = Field(default=None, ge=0.0)
    # Where the tolerance (and the floors) came from: a `harness calibrate` record id, or
    # a sentence saying they are external; `harness show` prints it.
    calibration: str | None = Field(default=None, min_length=1)

    @model_validator(mode="after")
    def _one_tolerance(self) -> Gate:
        exactly_one(self.relative_drop, self.absolute_drop,
                    "[gate] needs exactly one of relative_drop and absolute_drop")
        return self
