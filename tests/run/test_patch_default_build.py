"""`harness run SUITE --patch FILE` patches the suite's `engine.default_build` when no
`--sglang` names another build: the suite already says which build it runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.cli import main
from harness.run.outcome import RunOptions
from harness.run.plan import choose_build
from harness.suite.model import load_suite

SUITE = "tiny_dflash_sglang_cpu"  # engine.default_build = "sglang==0.5.23"
FIX = """diff --git a/python/sglang/version.py b/python/sglang/version.py
--- a/python/sglang/version.py
+++ b/python/sglang/version.py
@@ -1 +1 @@
-__version__ = "0.5.23"
+__version__ = "0.5.23+fix"
"""


@pytest.fixture
def diff(tmp_path: Path) -> Path:
    path = tmp_path / "fix.diff"
    path.write_text(FIX)
    return path


def test_patch_alone_applies_to_the_suites_default_build(diff: Path) -> None:
    loaded = load_suite(SUITE)
    default = loaded.suite.engine.default_build
    _, chosen = choose_build(loaded, RunOptions(patch=diff))
    assert (chosen.spec.text, chosen.spec.patch) == (default, diff)
    # a build named on the command line is the one patched
    _, named = choose_build(loaded, RunOptions(sglang="sglang==0.5.22", patch=diff))
    assert (named.spec.text, named.spec.patch) == ("sglang==0.5.22", diff)


def test_the_dry_run_names_the_default_build_and_the_patch(
        diff: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", SUITE, "--patch", str(diff), "--dry-run"]) == 0
    shown = capsys.readouterr()
    lines = shown.out.splitlines()
    assert "build      sglang==0.5.23" in lines, shown.err
    patches = next(line for line in lines if line.startswith("patches"))
    assert patches.startswith(f"patches    --patch {diff}; then test patch ")
