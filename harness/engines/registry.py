"""Which adapter serves a suite's `engine.kind` (each loaded on first use)."""

from __future__ import annotations

from harness.engines.interface import EngineAdapter


def adapter_for(kind: str) -> EngineAdapter:
    """The adapter of a suite's `engine.kind`."""
    if kind == "sglang":
        from harness.engines.sglang import ADAPTER

        return ADAPTER
    if kind == "reference":
        from harness.engines.reference_adapter import ADAPTER as REFERENCE

        return REFERENCE
    if kind == "vllm":
        from harness.engines.vllm import ADAPTER as VLLM

        return VLLM
    raise ValueError(f"no engine adapter for kind {kind!r}")
