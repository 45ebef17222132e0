"""SGLang 0.5.23's own DFLASH worker on CPU (`nox -s sglang_dflash_cpu`).

One engine environment, the one `nox -s sglang_cpu` uses (built by the harness's build
machinery, cached under HARNESS_CACHE), patched per run by the suite's test patch (and a
run's --patch) into trees beside it. Each real run happens once per session and is shared
by the tests that read it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness import builds
from tests.fixtures.sglang_cpu import SGLANG_CPU_SPEC

SPEC = SGLANG_CPU_SPEC  # the environment: the `sglang_cpu` fixture (tests/fixtures)
SUITE = "tiny_dflash_sglang_cpu"
REPO = builds.REPO_ROOT
HERE = Path(__file__).resolve().parent
REVERT = HERE / "revert_pr_34524.diff"  # PR #34524's sliding-layer default reverted
FORCED = HERE / "backend_ignores_encoder_only.diff"  # a fault only the runtime check sees
# the taps one layer early at forward time, the configured list untouched (runtime only)
CAPTURE_SHIFT = REPO / "tests" / "audit" / "changes" / "qwen3_capture_one_early_at_forward.diff"
TEST_PATCH = REPO / "tests" / "cpu_patches" / "sglang-0.5.23-dflash-cpu.diff"
STAND_IN = REPO / "tests" / "cpu_stand_ins"


@dataclass
class Run:
    done: subprocess.CompletedProcess[str]
    results: Path

    def records(self, series: str = SUITE) -> list[Path]:
        return sorted((self.results / "runs" / series).glob("*/run.json"))

    @property
    def output(self) -> str:
        return self.done.stdout[-4000:] + self.done.stderr[-6000:]


def harness_run(suite: str | Path, results: Path, *extra: str) -> Run:
    """`harness run` as a user types it (its own process, its exit code)."""
    done = subprocess.run(
        [sys.executable, "-m", "harness", "run", str(suite), "--sglang", SPEC, "--results",
         str(results), "--no-progress", *extra], cwd=REPO, capture_output=True, text=True,
        timeout=2400, env={**os.environ, "HARNESS_SGLANG_DEVICE": "cpu"}, check=False)
    return Run(done, results)


@pytest.fixture(scope="session")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One results folder: the paired gate reuses the shipped build's run from it."""
    return tmp_path_factory.mktemp("results")


@pytest.fixture(scope="session")
def fixed(sglang_cpu: builds.PreparedBuild, results: Path) -> Run:
    """The shipped suite on the release as released (plus its test patch): 100 questions."""
    return harness_run(SUITE, results)


@pytest.fixture(scope="session")
def reverted_paired(fixed: Run, results: Path) -> Run:
    """The reverted default measured anyway, judged against the release (reused)."""
    return harness_run(SUITE, results, "--patch", str(REVERT), "--no-enforce-contract",
                       "--against", SPEC, "--label", "reverted")


def short_suite(folder: Path, name: str, suite: Path = REPO / "suites" / f"{SUITE}.toml"
                ) -> Path:
    """A copy of the suite (or of an edited one) on 8 questions, under its own series
    name."""
    text = suite.read_text()
    short = folder / f"{name}.toml"
    short.write_text(text.replace("questions = 100", "questions = 8").replace(
        f'name = "{SUITE}"', f'name = "{name}"'))
    return short


def joined_patch(folder: Path, *patches: Path) -> Path:
    """One diff of several, each from its first file header (their notes left out)."""
    parts = [patch.read_text() for patch in patches]
    joined = folder / "joined.diff"
    joined.write_text("".join(part[part.index("diff --git "):] for part in parts))
    return joined


@pytest.fixture(scope="session")
def runtime_faults(sglang_cpu: builds.PreparedBuild,
                   tmp_path_factory: pytest.TempPathFactory) -> tuple[Run, Path]:
    """Every fault only the runtime record sees, planted together in one launch on a short
    copy of the planted "forward" suite (8 questions; it serves and expects blocks of 4,
    tests/audit/planted.py): the backend ignoring ENCODER_ONLY (what the kernel
    receives), the taps moved one layer early in the target's forward loop (what the
    capture takes), and four defects in the worker's draft step (what the draft forward
    is given and calls). Each sits in a file of its own and is observed by a check of its
    own; returns the run and its patch."""
    from tests.audit.planted import DEFECTS, edited_suite

    folder = tmp_path_factory.mktemp("runtime-faults")
    defect = DEFECTS["forward"]
    assert defect.patch is not None
    patch = joined_patch(folder, FORCED, CAPTURE_SHIFT, defect.patch)
    planted = edited_suite(defect.suite_edit, folder / "planted")
    short = short_suite(folder, "tiny_dflash_sglang_cpu_runtime_faults", planted)
    return harness_run(short, folder / "results", "--patch", str(patch), "--no-plot"), patch
