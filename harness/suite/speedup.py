"""`[speedup]`: where a suite measures speculation against the target alone.

    [speedup]
    baseline = "target_only"   # the same target, served with speculation off

    [floors]
    speedup_tpot = 1.2         # target alone's mean TPOT / speculation's, paired by prompt
    speedup_throughput = 1.1   # speculation's output tokens/s / the target alone's

With `[speedup]` every run also launches the target alone (the same build, host, prompts
and sampling, back to back after the speculative run) and records the speedup of TPOT
and of output throughput, each with a CI over prompts (harness.metrics.speedup). A
speedup floor without `[speedup]` is refused: there would be no figure to judge.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

SPEEDUP_FLOOR_KEYS = ("speedup_tpot", "speedup_throughput")


class SpeedupSetting(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    # "target_only": the suite's target, launched by its engine without any speculative
    # flag (the one baseline a run can launch itself)
    baseline: Literal["target_only"]
