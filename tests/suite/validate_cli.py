"""`harness validate` of a bad suite, as a user runs it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def refused_by_validate(suite: Path) -> str:
    """`python -m harness validate SUITE`'s output, once it has exited 2 with no traceback."""
    done = subprocess.run([sys.executable, "-m", "harness", "validate", str(suite)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    return done.stdout + done.stderr
