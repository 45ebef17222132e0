"""The engines the harness knows: which adapter serves a suite's `engine.kind`, each loaded
on first use so that `harness --help` loads none.

The list of engines is data below every folder (`harness/engine_kinds.py`): each kind's
adapter module and its secret flags, which `harness.secrets` reads from there too.
"""

from __future__ import annotations

import importlib

from harness.engine_kinds import ENGINES
from harness.engines.interface import EngineAdapter
from harness.secrets import secret_flags

__all__ = ["adapter_for", "kinds", "secret_flags"]


def kinds() -> tuple[str, ...]:
    return tuple(ENGINES)


def adapter_for(kind: str) -> EngineAdapter:
    """The adapter of a suite's `engine.kind`."""
    engine = ENGINES.get(kind)
    if engine is None:
        raise ValueError(f"no engine adapter for kind {kind!r}")
    adapter: EngineAdapter = importlib.import_module(engine.adapter_module).ADAPTER
    return adapter
