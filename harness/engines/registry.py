"""The engines the harness knows: which adapter serves a suite's `engine.kind` (each loaded
on first use, so that `harness --help` loads none), and so which flags are secret.

`LOADERS` is the one list of engines. The secret flags come from it too: importing this
module hands `harness.secrets` the table (`secret_flags`), so an adapter that serves a
suite has its secret flags hidden everywhere, and the union over the list covers a command
line of no known engine.
"""

from __future__ import annotations

from collections.abc import Callable

from harness import secrets
from harness.engines.interface import EngineAdapter


def _sglang() -> EngineAdapter:
    from harness.engines.sglang import ADAPTER

    return ADAPTER


def _reference() -> EngineAdapter:
    from harness.engines.reference_adapter import ADAPTER

    return ADAPTER


def _vllm() -> EngineAdapter:
    from harness.engines.vllm import ADAPTER

    return ADAPTER


LOADERS: dict[str, Callable[[], EngineAdapter]] = {
    "sglang": _sglang,
    "reference": _reference,
    "vllm": _vllm,
}


def kinds() -> tuple[str, ...]:
    return tuple(LOADERS)


def adapter_for(kind: str) -> EngineAdapter:
    """The adapter of a suite's `engine.kind`."""
    loader = LOADERS.get(kind)
    if loader is None:
        raise ValueError(f"no engine adapter for kind {kind!r}")
    return loader()


def secret_flags(kind: str | None = None) -> frozenset[str]:
    """The secret flags of the engine `kind`; every registered engine's when it is None or
    not a registered engine."""
    if kind is not None and kind in LOADERS:
        return frozenset(adapter_for(kind).secret_flags)
    return frozenset().union(*(adapter_for(known).secret_flags for known in LOADERS))


secrets.use_engine_flags(secret_flags)
