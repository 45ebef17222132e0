"""What the end-to-end tests of `harness grid` on the CPU reference engine share: their
marks and the grid run as a user starts it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.builds import has_reference_dependencies

ROOT = Path(__file__).resolve().parents[2]
MARKS = [pytest.mark.slow, pytest.mark.e2e,  # nox -s e2e
         pytest.mark.skipif(not has_reference_dependencies(sys.executable),
                            reason="this environment lacks the reference extra")]


def run_grid(suite: Path, results: Path, exit_codes: tuple[int, ...]) -> tuple[str, Path]:
    """`harness grid SUITE --results RESULTS` in a child process: it must end with one of
    `exit_codes` and no traceback. Its stdout and the grid record's folder (the suite file
    is named for the suite)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MPLBACKEND": "Agg"}
    done = subprocess.run([sys.executable, "-m", "harness", "grid", str(suite), "--results",
                           str(results), "--no-progress"], capture_output=True, text=True,
                          env=env, timeout=900, check=False)
    assert done.returncode in exit_codes, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    [folder] = [p.parent for p in (results / "grids" / suite.stem).glob("*/grid.json")]
    return done.stdout, folder
