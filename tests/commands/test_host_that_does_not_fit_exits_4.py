"""Exit 4 on every command for a host that does not fit the suite (issue 27, case 9):
`ab` and `calibrate` exited 3 ("measured nothing") where `run` exits 4."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import cli


@pytest.mark.parametrize("argv", [
    ["ab", "qwen3_8b_dflash", "--a", "sglang==0.5.22", "--b", "sglang==0.5.23"],
    ["calibrate", "qwen3_8b_dflash", "--runs", "2", "--build", "sglang==0.5.23"],
    ["run", "qwen3_8b_dflash", "--build", "sglang==0.5.23", "--no-plot"],
])
def test_a_gpu_suite_on_this_host_is_skipped_with_exit_4(
        argv: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("HARNESS_GPU_INVENTORY", raising=False)  # this host: no GPU
    assert cli.main([*argv, "--results", str(tmp_path)]) == 4
    assert "Traceback" not in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()  # nothing built, nothing measured
