"""Issue 11 defect 2, as a user meets it: a fresh clone with no ../shared beside it, no
GPU, and `datasets` reading the hub's files (here a local mirror, offline) runs the GPU
suite's dry run and the reference suite, with the data hash the shared files give."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.builds import has_reference_dependencies

from .conftest import GSM8K_ROWS_SHA256, GSM8K_TEST, SPEC_BENCH_ROWS_SHA256, needs

REPO_ROOT = Path(__file__).resolve().parents[2]
DATA_LINE = re.compile(r"^data +(.+?) \(rows sha256 ([0-9a-f]{64})\)", re.MULTILINE)


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The project's files in a folder with no ../shared beside it."""
    folder = tmp_path_factory.mktemp("fresh") / "spec-harness"
    for name in ("harness", "suites"):
        shutil.copytree(REPO_ROOT / name, folder / name,
                        ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copyfile(REPO_ROOT / "pyproject.toml", folder / "pyproject.toml")
    assert not (folder.parent / "shared").exists()
    return folder


def _env(clone: Path, mirror: Path, hf_home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "HARNESS_DATA_DIR"}
    return env | {"PYTHONPATH": str(clone), "HARNESS_HF_MIRROR": str(mirror),
                  "HF_HOME": str(hf_home), "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1",
                  "HARNESS_GPU_INVENTORY": str(hf_home.parent / "no-gpus.json")}


def _harness(cwd: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    (Path(env["HARNESS_GPU_INVENTORY"])).write_text("[]")
    return subprocess.run([sys.executable, "-m", "harness", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=1200)


def test_gpu_suite_dry_run_without_shared_data(clone: Path, hub_mirror: Path,
                                               tmp_path: Path) -> None:
    env = _env(clone, hub_mirror, tmp_path / "hf")
    done = _harness(clone, env, "run", "suites/gemma4_dflash_31b.toml", "--dry-run")
    assert done.returncode == 0, done.stdout + done.stderr
    source, digest = DATA_LINE.search(done.stdout).groups()
    assert source == "hf:openai/gsm8k/main/test" and digest == GSM8K_ROWS_SHA256
    # the same suite from this checkout with the shared files: the same hash
    shared = {**env, "PYTHONPATH": str(REPO_ROOT),
              "HARNESS_DATA_DIR": str(needs(GSM8K_TEST).parents[1])}
    done = _harness(REPO_ROOT, shared, "run", "suites/gemma4_dflash_31b.toml", "--dry-run")
    assert done.returncode == 0, done.stdout + done.stderr
    local_source, local_digest = DATA_LINE.search(done.stdout).groups()
    assert local_source.endswith("gsm8k/test.jsonl") and local_digest == digest
    spec = _harness(clone, env, "run", "suites/qwen3_8b_dflash_spec_bench.toml", "--dry-run")
    assert spec.returncode == 0, spec.stdout + spec.stderr
    assert DATA_LINE.search(spec.stdout).group(2) == SPEC_BENCH_ROWS_SHA256
    assert "480 prompts, 560 requests" in spec.stdout


def test_dry_run_without_any_data_is_exit_2(clone: Path, tmp_path: Path) -> None:
    env = _env(clone, tmp_path / "no-mirror", tmp_path / "hf")
    done = _harness(clone, env, "run", "suites/gemma4_dflash_31b.toml", "--dry-run")
    assert done.returncode == 2
    assert "cannot load hf:openai/gsm8k/main/test with `datasets`" in done.stderr
    assert "HF_DATASETS_OFFLINE" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.slow
@pytest.mark.e2e  # nox -s e2e
def test_reference_suite_runs_from_the_clone(clone: Path, hub_mirror: Path,
                                            tmp_path: Path) -> None:
    if not has_reference_dependencies(sys.executable):
        pytest.skip("this environment lacks the reference extra (pip install -e '.[reference]')")
    from tests.tiny_variants import tiny_variant

    (clone / "suites" / "tiny_four.toml").write_text(
        tiny_variant("tiny_four", floor=1.0, questions=4))
    env = _env(clone, hub_mirror, tmp_path / "hf")
    results = tmp_path / "results"
    done = _harness(clone, env, "run", "suites/tiny_four.toml", "--results", str(results),
                    "--no-progress", "--no-plot")
    assert done.returncode == 0, done.stdout + done.stderr
    record = json.loads(next(results.glob("runs/tiny_four/*/run.json")).read_text())
    assert record["provenance"]["data_source"] == "hf:openai/gsm8k/main/test"
    assert record["provenance"]["data_sha256"] == GSM8K_ROWS_SHA256
    assert record["workload"]["data_sha256"] == GSM8K_ROWS_SHA256
