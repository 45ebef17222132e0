"""Issue 31: input checks before any build. A run whose data cannot be found ends with
the data's own message (exit 2) before it builds an engine environment or makes a run
folder."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from harness.cli import main


@pytest.fixture
def no_data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A host with no local copy of the data, no network to the hub, an empty HF cache."""
    monkeypatch.setattr("harness.workloads.data.REPO_ROOT", tmp_path / "clone" / "repo")
    monkeypatch.setenv("HARNESS_DATA_DIR", str(tmp_path / "nothing-here"))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("HARNESS_HF_MIRROR", raising=False)
    return tmp_path


def _no_build(*_args: object, **_kwargs: object) -> None:
    raise AssertionError("the engine was prepared before the input was checked")


@pytest.fixture
def no_build(monkeypatch: pytest.MonkeyPatch) -> None:
    """Preparing an engine (its environment, a reference env) fails the test."""
    for preparer in ("harness.run.plan.prepare_engine", "harness.builds.prepare",
                     "harness.builds.prepare_reference_env"):
        monkeypatch.setattr(preparer, _no_build)


@pytest.mark.usefixtures("no_build")
@pytest.mark.parametrize("suite", ["tiny_dflash_cpu", "tiny_ngram_sglang_cpu"])
def test_missing_data_ends_before_any_build(suite: str, no_data: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    results = no_data / "results"
    started = time.monotonic()
    assert main(["run", suite, "--results", str(results), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "gsm8k/test.jsonl" in err and "give it one of three ways" in err
    assert "HARNESS_DATA_DIR" in err and "Traceback" not in err
    assert not (results / "runs").exists()  # nothing to clean up: no run folder either
    assert time.monotonic() - started < 120  # seconds, not an engine build (generous: load)


@pytest.mark.usefixtures("no_build")
@pytest.mark.parametrize("flag", ["--target-model", "--draft-model"])
def test_a_missing_local_model_ends_before_any_build(flag: str, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    results = tmp_path / "results"
    missing = tmp_path / "no-such-model"
    assert main(["run", "tiny_standalone_sglang_cpu", flag, str(missing), "--results",
                 str(results), "--no-progress"]) == 2
    role = flag.removeprefix("--").removesuffix("-model")
    assert f"the {role} model {missing}: no such file or folder" in capsys.readouterr().err
    assert not (results / "runs").exists()


def test_a_suites_relative_model_is_found_from_any_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The shipped suites name the tiny target relative to the repository: a run (and the
    dry run's line) from another folder still finds it."""
    from types import SimpleNamespace

    from harness.builds import REPO_ROOT
    from harness.run.plan import models
    from harness.suite.model import load_suite

    monkeypatch.chdir(tmp_path)
    served = models(load_suite("tiny_ngram_sglang_cpu").suite,
                    SimpleNamespace(target_model=None, draft_model=None))
    assert served.target == str(REPO_ROOT / "reference_engine/tiny/target")
    hub = models(load_suite("tiny_ngram_sglang_cpu").suite,
                 SimpleNamespace(target_model="Qwen/Qwen3-8B", draft_model=None))
    assert hub.target == "Qwen/Qwen3-8B"  # a hub id stays one
