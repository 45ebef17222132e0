"""The tests' conftest loads where the test extra is not installed: `nox -s sglang_args`
runs a few oracle tests in SGLang's own environment (pytest, torch, SGLang and its import
dependencies), and a conftest importing, say, hypothesis at its top failed that session
before any of its tests ran."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]


def _test_extra_modules() -> set[str]:
    """The top-level modules of the test extra's distributions, pytest itself excepted."""
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())[
        "project"]["optional-dependencies"]["test"]
    names = {Requirement(line).name.lower().replace("_", "-") for line in extra} - {"pytest"}
    return {module for module, dists in packages_distributions().items()
            if any(d.lower().replace("_", "-") in names for d in dists)
            and module.isidentifier()}


def test_conftest_imports_with_the_test_extra_missing() -> None:
    blocked = sorted(_test_extra_modules())
    assert "hypothesis" in blocked and "xdist" in blocked  # the mapping found the extra
    probe = ("import sys\n"
             f"for name in {blocked!r}:\n"
             "    sys.modules[name] = None  # import raises ModuleNotFoundError\n"
             "import tests.conftest\n")
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
