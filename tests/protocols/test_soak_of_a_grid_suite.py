"""The shipped real-engine grid suites declare their soak too: `harness soak` of such a
suite measures its main workload alone on one launch, with prefix caching on through the
engine's own flag; the grid (whose speedup gate needs `[speedup]`, which a soak drops)
is not the soak's and is dropped with it, never a refusal."""

from __future__ import annotations

import pytest

from harness.protocols.soak import soak_settings, soak_suite
from harness.suite.model import load_suite


@pytest.mark.parametrize(("name", "present", "absent"), [
    ("tiny_dflash_grid_sglang_cpu", [], ["--disable-radix-cache"]),
    ("tiny_dflash_grid_vllm_cpu", ["--enable-prefix-caching"], ["--no-enable-prefix-caching"]),
])
def test_the_soak_of_a_grid_suite(name: str, present: list[str], absent: list[str]) -> None:
    loaded = load_suite(name)
    assert loaded.suite.grid is not None and loaded.suite.grid.speedup_max_drop is not None
    derived = soak_suite(loaded, 2).suite
    assert derived.name == f"{name}-soak" and derived.grid is None and derived.speedup is None
    assert derived.workload.questions == 2
    args = list(derived.engine.extra_args)
    assert all(flag in args for flag in present) and not any(a in args for a in absent)
    settings = soak_settings(loaded.suite.soak)
    assert (settings.duration_s, settings.window_s) == (120.0, 30.0)
