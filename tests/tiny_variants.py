"""The shipped tiny suite with a few fields changed, for tests that need a short run."""

from __future__ import annotations

import tomllib
from typing import Any

import tomli_w

from harness.suite.model import SUITES_DIR

TINY = SUITES_DIR / "tiny_dflash_cpu.toml"
# The engine fields of a test that measures speed: every target forward takes at least
# 25 ms (reference_engine/pacing.py), so an answer streams over at least a tenth of a
# second in chunks a busy client still reads apart. The tiny model's own forward takes a
# few milliseconds: a loaded CI read its short answers whole, a TPOT of 0 and no ratio.
PACED_ENGINE: dict[str, Any] = {"env": {"REFERENCE_TARGET_FORWARD_S": "0.025"}}


def tiny_variant(name: str, floor: float | None = None, engine: dict[str, Any] | None = None,
                 **workload: Any) -> str:
    """TOML text of the tiny suite named `name`, with workload fields, engine fields and
    the accept-length floor replaced (a few prompts say nothing about the real floor)."""
    document = tomllib.loads(TINY.read_text())
    document["name"] = name
    document["workload"] |= workload
    document["engine"] |= engine or {}
    if floor is not None:
        document["floors"]["accept_length"] = floor
    return tomli_w.dumps(document)
