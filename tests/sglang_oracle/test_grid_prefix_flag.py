"""The workload grid's prefix-caching flags on an SGLang launch line, parsed by SGLang's
own parser (`nox -s sglang_args`): a shipped SGLang suite's line with prefix caching off
(`harness.suite.prefix_caching.PREFIX_CACHES`, what `harness grid` adds to `extra_args`) lands
in `disable_radix_cache` True; with it on, SGLang's default (the radix cache on)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.suite.model import load_suite
from harness.suite.prefix_caching import flags_for
from tests.sglang_oracle.test_server_args import _server_args, launch_argv

SUITE = Path(__file__).resolve().parents[2] / "suites" / "tiny_ngram_sglang_cpu.toml"


@pytest.fixture(scope="module")
def server_args() -> Any:
    return _server_args()


@pytest.mark.parametrize(("setting", "disabled"), [("on", False), ("off", True)])
def test_the_grid_flag_sets_the_radix_cache(server_args: Any, setting: str,
                                            disabled: bool) -> None:
    own, extra = launch_argv(load_suite(SUITE).suite)
    argv = [*own, *extra, *flags_for("sglang", setting)]
    assert server_args.prepare_server_args(argv).disable_radix_cache is disabled
