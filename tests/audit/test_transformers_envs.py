"""The transformers environments: one per pin, made once under a lock, reused after."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from harness.audit import envs


def test_names_follow_the_pin() -> None:
    assert envs.env_name("transformers==5.19.0") == "transformers-5.19.0"
    assert envs.env_name("transformers>=5").startswith("transformers-")
    assert envs.env_name("transformers>=5") != envs.env_name("transformers>=6")


def test_made_once_under_the_lock_and_reused(tmp_path: Path, monkeypatch) -> None:
    calls: list[list[str]] = []

    def fake_run(command: list[str], what: str) -> None:
        calls.append(command)
        time.sleep(0.2)  # long enough for the other thread to wait on the lock
        if "venv" in command:
            python = Path(command[-1]) / "bin" / "python"
            python.parent.mkdir(parents=True)
            python.write_text("")

    monkeypatch.setattr(envs, "_run", fake_run)
    found: list[Path] = []
    threads = [threading.Thread(target=lambda: found.append(
        envs.ensure_env("transformers==5.19.0", tmp_path))) for _ in range(2)]  # fmt: skip
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(calls) == 2  # one venv, one pip install: the second caller waited and reused
    assert found[0] == found[1] == tmp_path / "transformers-5.19.0" / "bin" / "python"
    assert envs.env_python("transformers==5.19.0", tmp_path) == found[0]


def test_half_made_environment_is_rebuilt(tmp_path: Path, monkeypatch) -> None:
    leftover = tmp_path / "transformers-5.19.0"
    (leftover / "junk").mkdir(parents=True)  # no completion marker: an interrupted install
    commands: list[list[str]] = []

    def fake_run(command: list[str], what: str) -> None:
        commands.append(command)
        if "venv" in command:
            Path(command[-1]).mkdir()

    monkeypatch.setattr(envs, "_run", fake_run)
    envs.ensure_env("transformers==5.19.0", tmp_path)
    assert not (leftover / "junk").exists() and len(commands) == 2


def test_failed_install_is_one_clear_error(tmp_path: Path, monkeypatch) -> None:
    def fail(command, **kwargs):
        import subprocess

        return subprocess.CompletedProcess(command, 1, "", "ERROR: No matching distribution")

    monkeypatch.setattr("subprocess.run", fail)
    with pytest.raises(envs.AuditEnvError, match=r"creating .* failed .*No matching"):
        envs.ensure_env("transformers==0.0.0", tmp_path)
