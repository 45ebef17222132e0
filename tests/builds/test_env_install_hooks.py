"""`build.envs.ensure_env`'s two hooks, as the engine builds use them: SGLang's CPU recipe
replaces the one pip install (`installer`), vLLM's CPU build cleans up after it (`after`).
A real virtual environment is made each time; nothing is installed into it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.builds import envs


def test_an_installer_replaces_the_pip_install_and_its_result_is_noted(tmp_path: Path) -> None:
    calls: list[tuple[Any, ...]] = []

    def installer(pip: list[str], python: Path, args: list[str], scratch: Path
                  ) -> dict[str, Any]:
        calls.append((pip, python, args))
        return {"engine_env": {"SGLANG_USE_CPU_ENGINE": "1"}}

    python = envs.ensure_env(tmp_path / "env", "a recipe", lambda _: ["pkg==1"], {"k": 1},
                             installer=installer)
    assert len(calls) == 1 and calls[0][2] == ["pkg==1"] and Path(python).exists()
    note = json.loads((tmp_path / "env" / envs.BUILD_NOTE).read_text())
    assert note["installed"] == {"engine_env": {"SGLANG_USE_CPU_ENGINE": "1"}}
    assert note["k"] == 1
    # complete: made once
    assert envs.ensure_env(tmp_path / "env", "a recipe", lambda _: ["pkg==1"], {"k": 1},
                           installer=installer) == python and len(calls) == 1


def test_after_runs_once_the_install_is_done(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    installed: list[list[str]] = []
    monkeypatch.setattr(envs, "_make_env",
                        lambda env_dir, python, args, what: (envs._make_venv(env_dir, python),
                                                             installed.append(args)))
    seen: list[str] = []
    python = envs.ensure_env(tmp_path / "env", "a build", lambda _: ["pkg==1"], {},
                             ["--index-url", "x"], after=seen.append)
    assert installed == [["--index-url", "x", "pkg==1"]] and seen == [python]


def test_the_hooks_are_keyword_only() -> None:
    with pytest.raises(TypeError):
        envs.ensure_env(Path("/nonexistent"), "x", lambda _: [], {}, (), lambda _: None)  # type: ignore[misc]
