"""Fixtures of the analysis tests."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def results(tmp_path: Path) -> Path:
    return tmp_path / "results"
