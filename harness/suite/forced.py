"""`[forced]`: the tolerances of the split of a speedup drop between two builds
(`harness forced SUITE --build B --against A`, harness.protocols.forced_split).

    [forced]
    system_max_drop = 0.10      # the system's share: B's speedup over its target alone at
                                # each forced accept length within 10% of A's at the same
                                # forced accept length, paired by question
    draft_relative_drop = 0.05  # the draft's share: B's real (knob off) accept length
                                # within 5% of A's, paired by question (or
                                # draft_absolute_drop = 0.2, accept-length units)
    alpha = 0.05                # one-sided level of each side (the system's tests share it)
    inconclusive = "pass"       # how a finding that is neither is judged

The system's tolerance is a share of A's speedup (as `[speedup] max_drop`); the draft's is
the paired gate's (`[gate]`: a share of A's accept length, or accept-length units). Each
is gated on its own, so a verdict names which of the two lost the speedup.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from harness.suite.entries import exactly_one


class ForcedSetting(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    system_max_drop: float = Field(gt=0.0, lt=1.0, allow_inf_nan=False)
    draft_relative_drop: float | None = Field(default=None, gt=0.0, lt=1.0,
                                              allow_inf_nan=False)
    draft_absolute_drop: float | None = Field(default=None, gt=0.0, allow_inf_nan=False)
    alpha: float = Field(default=0.05, gt=0.0, lt=0.5)
    inconclusive: Literal["fail", "pass"] = "pass"

    @model_validator(mode="after")
    def _one_draft_tolerance(self) -> ForcedSetting:
        exactly_one(self.draft_relative_drop, self.draft_absolute_drop,
                    "[forced] needs exactly one of draft_relative_drop and draft_absolute_drop")
        return self
