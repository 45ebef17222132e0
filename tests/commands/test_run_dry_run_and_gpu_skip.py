"""`harness run SUITE` through `harness.cli.main`: dry run, skip on a host without GPUs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.cli import main

GEMMA = "suites/gemma4_dflash_31b.toml"


@pytest.fixture(autouse=True)
def _in_repo(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, harness_cache: Path) -> None:
    monkeypatch.chdir(Path(__file__).resolve().parents[2])


def _launch_line(out: str) -> str:
    return next(line for line in out.splitlines() if line.startswith("launch"))


def test_dry_run_prints_launch_line(no_gpus: None, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", GEMMA, "--dry-run"]) == 0
    out = capsys.readouterr().out
    launch = _launch_line(out)
    assert "-m sglang.launch_server" in launch
    assert "--model-path google/gemma-4-31B-it" in launch
    assert "--speculative-num-draft-tokens 16" in launch and "--tp-size 2" in launch
    assert "questions 5..204 of test.jsonl" in out
    assert "floors     accept length (server_avg) >= 5.4, accuracy >= 0.75" in out
    assert "needs 2 x H100/H200 with >= 80 GiB, found 0" in out
    assert "verdict:" not in out  # a dry run judges nothing


def test_dry_run_states_what_sequential_sends_past_a_look(
    no_gpus: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = Path(GEMMA).read_text().replace("# sequential_in_flight = 16",
                                           "sequential_in_flight = 16")
    assert "\nsequential_in_flight = 16" in text
    (tmp_path / "gemma.toml").write_text(text)
    assert main(["run", str(tmp_path / "gemma.toml"), "--dry-run"]) == 0
    assert ("concurrency 128 (with --sequential, 16 past the next look), seed 0"
            in capsys.readouterr().out)
    assert main(["run", GEMMA, "--dry-run"]) == 0
    assert "concurrency 128, seed 0" in capsys.readouterr().out


def test_run_without_gpus_is_skipped_with_exit_4(
    no_gpus: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = tmp_path / "results"
    assert main(["run", GEMMA, "--results", str(results), "--no-plot", "--no-progress"]) == 4
    out = capsys.readouterr().out
    assert "verdict: SKIPPED" in out
    assert "needs 2 x H100/H200 with >= 80 GiB, found 0" in out
    assert not results.exists()  # nothing was run, nothing recorded


def _inventory_file(monkeypatch: pytest.MonkeyPatch, folder: Path,
                    devices: list[dict[str, object]]) -> None:
    """The host's GPUs, `devices`, from an inventory file (HARNESS_GPU_INVENTORY)."""
    inventory = folder / "gpus.json"
    inventory.write_text(json.dumps(devices))
    monkeypatch.setenv("HARNESS_GPU_INVENTORY", str(inventory))


def test_run_with_an_empty_inventory_file_is_skipped(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _inventory_file(monkeypatch, tmp_path, [])
    assert main(["run", GEMMA, "--results", str(tmp_path / "r"), "--no-progress"]) == 4
    assert "needs 2 x" in capsys.readouterr().out


def _dry_run(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
             inventory: str, exit_code: int) -> tuple[str, str]:
    """`harness run GEMMA --dry-run` with HARNESS_GPU_INVENTORY=`inventory`: it must end
    with `exit_code`; its stdout and stderr."""
    monkeypatch.setenv("HARNESS_GPU_INVENTORY", inventory)
    assert main(["run", GEMMA, "--dry-run"]) == exit_code
    captured = capsys.readouterr()
    return captured.out, captured.err


def test_dry_run_with_gpus_reports_devices(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    out, _ = _dry_run(monkeypatch, capsys, "2xH100:80", 0)
    assert "topology   uses 2 x H100/H200: devices [0, 1]" in out


def test_dry_run_picks_matching_devices(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _inventory_file(monkeypatch, tmp_path, [
        {"index": 0, "name": "NVIDIA A100-SXM4-80GB", "memory_gib": 80},
        {"index": 1, "name": "NVIDIA H100 80GB HBM3", "memory_gib": 80},
        {"index": 2, "name": "NVIDIA H200", "memory_gib": 141},
    ])
    assert main(["run", GEMMA, "--dry-run"]) == 0
    assert "devices [1, 2]" in capsys.readouterr().out


def test_bad_inventory_is_bad_input(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _, err = _dry_run(monkeypatch, capsys, "lots of GPUs", 2)
    assert "HARNESS_GPU_INVENTORY" in err and "expected COUNTxMODEL[:GiB]" in err
    assert "Traceback" not in err


def test_bad_build_spec_ends_before_any_work(
    no_gpus: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", GEMMA, "--sglang", "not a spec!!", "--dry-run"]) == 2
    assert "not a pip requirement" in capsys.readouterr().err
    patch = tmp_path / "fix.diff"
    patch.write_text("")
    assert main(["run", GEMMA, "--sglang", "sglang==0.5.23", "--patch", str(patch)]) == 2
    assert "not a unified diff" in capsys.readouterr().err


def test_run_unknown_suite(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "suites/nope.toml", "--dry-run"]) == 2
    assert "suites/nope.toml: no such suite file" in capsys.readouterr().err
