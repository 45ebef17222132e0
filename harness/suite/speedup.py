"""`[speedup]`: where a suite measures speculation against the target alone.

    [speedup]
    baseline = "target_only"   # the same target, served with speculation off
    max_drop = 0.15            # optional: with `harness run --against A`, each speedup
                               # of B within 15% of A's, paired by prompt

    [floors]
    speedup_tpot = 1.2         # target alone's mean TPOT / speculation's, paired by prompt
    speedup_throughput = 1.1   # speculation's output tokens/s / the target alone's

With `[speedup]` every run also launches the target alone (the same build, host, prompts
and sampling, back to back after the speculative run) and records the speedup of TPOT
and of output throughput, each with a CI over prompts (harness.metrics.speedup). A
speedup floor without `[speedup]` is refused: there would be no figure to judge.

`max_drop` is the paired speedup gate's tolerance (harness.metrics.speedup.paired_speedup):
a run judged against a reference build (`--against`, `[gate] against`) fails when B's TPOT
or throughput speedup is shown below A's by more than `max_drop` of A's, and errs when A
has no speedup to pair with. Its alpha and its `inconclusive` setting are the `[gate]`'s.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

SPEEDUP_FLOOR_KEYS = ("speedup_tpot", "speedup_throughput")


class SpeedupSetting(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    # "target_only": the suite's target, launched by its engine without any speculative
    # flag (the one baseline a run can launch itself)
    baseline: Literal["target_only"]
    # the tolerated relative drop of each speedup between builds (--against): a share of
    # the reference build's speedup; None: speedup is not gated between builds
    max_drop: float | None = Field(default=None, gt=0.0, lt=1.0, allow_inf_nan=False)
