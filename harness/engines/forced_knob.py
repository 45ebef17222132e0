"""Forced acceptance: each engine's own knob that fixes how many tokens a verify step
commits, whatever the draft proposed (issue 52, docs/speed.md "Forced acceptance").

A speedup that falls can be the draft's fault (fewer tokens accepted) or the system's (the
same tokens, more time a step). With the acceptance forced, speed at a ladder of accept
lengths is the system's curve alone. Each engine says, as data, how its knob is set
(`carrier`: an environment variable on launch, or keys of the speculative config), which
algorithms read it, and the first release known to have it; `harness.protocols.forced`
applies it. Light to import: no engine code runs here.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Literal

Carrier = Literal["environment", "speculative_config"]

# engine.kind -> the module whose KNOB is its forced-acceptance knob
KNOB_MODULES: dict[str, str] = {
    "sglang": "harness.engines.sglang.forced",
    "vllm": "harness.engines.vllm.forced",
    "reference": "reference_engine.forced",
}


@dataclass(frozen=True)
class ForcedKnob:
    engine: str
    carrier: Carrier
    length_name: str  # the variable or key that takes the forced accept length
    fixed: tuple[tuple[str, str | float], ...]  # the companion settings, always the same
    algorithms: frozenset[str]  # the speculative algorithms whose verify step reads it
    first_release: str | None  # the first release known to read it (None: always there)
    source: str  # where the engine reads it, for messages and the record

    def settings(self, accept_length: float) -> dict[str, str | float]:
        """What to set for one forced accept length (tokens a verify step commits)."""
        value: str | float = (f"{accept_length:g}" if self.carrier == "environment"
                              else float(accept_length))
        return {**{name: v for name, v in self.fixed}, self.length_name: value}


def knob_for(kind: str) -> ForcedKnob | None:
    """The forced-acceptance knob of an engine kind; None for an engine without one."""
    module = KNOB_MODULES.get(kind)
    if module is None:
        return None
    knob: ForcedKnob = importlib.import_module(module).KNOB
    return knob
