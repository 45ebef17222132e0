"""`harness run SUITE --prepare-only`: the engine's environment and models made ahead of a
run (a host with the network before the GPU host, CI before its sessions), nothing launched,
nothing recorded."""

from __future__ import annotations

from pathlib import Path

import psutil
import pytest

from harness.cli import main

TINY = "suites/tiny_dflash_cpu.toml"


@pytest.fixture(autouse=True)
def _in_repo(monkeypatch: pytest.MonkeyPatch, harness_cache: Path) -> None:
    monkeypatch.chdir(Path(__file__).resolve().parents[2])


def test_prepares_the_engine_and_names_it_without_a_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = tmp_path / "results"
    children_before = {child.pid for child in psutil.Process().children(recursive=True)}
    assert main(["run", TINY, "--prepare-only", "--results", str(results)]) == 0
    out = capsys.readouterr().out
    environment = next(line for line in out.splitlines()
                       if line.startswith("engine environment: "))
    python = environment.removeprefix("engine environment: ").split(" (")[0]
    assert Path(python).exists() and environment.endswith("(reference 0.1.0)")
    models = next(line for line in out.splitlines() if line.startswith("models: "))
    target, draft = (part.split(" ", 1)[1] for part in
                     models.removeprefix("models: ").split(", "))
    assert (Path(target) / "config.json").is_file() and (Path(draft) / "config.json").is_file()
    assert "verdict:" not in out and not results.exists()  # nothing judged, nothing recorded
    left = {child.pid for child in psutil.Process().children(recursive=True)} - children_before
    assert not left  # no server was started


@pytest.mark.parametrize("flags, named", [
    (["--dry-run"], "--dry-run"),
    (["--server", "http://127.0.0.1:1"], "--server"),
    (["--against", "reference"], "--against"),
    (["--launcher", "slurm"], "--launcher"),
])
def test_refuses_flags_that_ask_for_a_run(
    flags: list[str], named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", TINY, "--prepare-only", *flags]) == 2
    err = capsys.readouterr().err
    assert "--prepare-only" in err and named in err and "Traceback" not in err


def test_an_engine_that_cannot_be_prepared_is_an_error_naming_it(
    capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", TINY, "--prepare-only", "--engine-python", "/nonexistent/python"]) == 3
    assert "/nonexistent/python" in capsys.readouterr().err
