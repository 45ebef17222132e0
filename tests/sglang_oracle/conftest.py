"""SGLang releases whose own code the oracle runs; a release whose wheel is not cached skips."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from .extract import OracleUnavailable
from .sglang_code import SGLang

VERSIONS = ("0.5.17", "0.5.20", "0.5.23")  # 0.5.20 added UNO (two non-draft tokens a step)


@pytest.fixture(params=VERSIONS)
def version(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def make_sglang(version: str) -> Callable[..., SGLang]:
    """SGLang `version`'s bookkeeping for a server (skips when its wheel is not cached)."""
    def make(num_draft_tokens: int = 16, decode_log_interval: int = 40) -> SGLang:
        try:
            return SGLang(version, num_draft_tokens, decode_log_interval)
        except OracleUnavailable as missing:
            pytest.skip(str(missing))

    return make
