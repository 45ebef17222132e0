"""The real SGLang 0.5.23 on CPU (`nox -s sglang_cpu`): its engine environment, built by
the harness's own build machinery, shared by every test here.

These tests need that environment (about 8 minutes to build, 4 GB, cached under
HARNESS_CACHE); `nox -s tests` leaves this folder to `nox -s sglang_cpu`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import builds
from tests.fixtures.sglang_cpu import SGLANG_CPU_SPEC

SPEC = SGLANG_CPU_SPEC  # the environment: the `sglang_cpu` fixture (tests/fixtures)
REPO = builds.REPO_ROOT
STAND_IN = REPO / "tests" / "cpu_stand_ins"


@pytest.fixture(scope="session")
def tiny_causal_draft(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.sglang_cpu.tiny_causal_draft import TARGET, cut

    return cut(TARGET, tmp_path_factory.mktemp("draft") / "tiny-causal-draft")
