"""Issue 31: the dry run's launch line is the whole command, environment included
(stand-ins on PYTHONPATH, SGLang's CPU engine switch, the suite's engine.env, secrets
redacted), so that pasting it into a shell starts the server."""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

import pytest

from harness.cli import main
from harness.run.launch import free_port
from tests.fixtures.pasted_line import wait_serving

ROOT = Path(__file__).resolve().parents[2]
FAKE = ROOT / "tests" / "fake_sglang"

SUITE = """
name = "pasted"
[engine]
kind = "sglang"
stand_ins = ["{stand_in}"]
extra_args = ["--api-key", "sk-PLANTED-1", "--decode-log-interval", "1"]
[engine.env]
HF_TOKEN = "hf_PLANTED_2"
FAKE_SGLANG_MODE = "ok"
[target]
model = "reference_engine/tiny/target"
[speculative]
algorithm = "NGRAM"
num_draft_tokens = 4
[topology]
gpus = 0
[workload]
kind = "gsm8k"
shots = 0
questions = 4
max_tokens = 16
[floors]
accept_length = 1.0
"""


def _launch_line(out: str) -> str:
    [line] = [line for line in out.splitlines() if line.startswith("launch     ")]
    return line.removeprefix("launch     ")


def test_the_sglang_cpu_line_carries_its_environment(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A build not made yet: the line says what the run will set (parsed back here)."""
    from harness.builds.sglang_cpu import CPU_ENGINE_ENV

    monkeypatch.setenv("HARNESS_SGLANG_DEVICE", "cpu")
    monkeypatch.setenv("HARNESS_CACHE", str(tmp_path / "cache"))  # no env built there
    assert main(["run", "tiny_ngram_sglang_cpu", "--dry-run", "--sglang",
                 "sglang==0.5.23"]) == 0
    words = shlex.split(_launch_line(capsys.readouterr().out))
    assert words[0] == "env"
    assignments = dict(word.split("=", 1) for word in words[1:3])
    assert assignments == {**CPU_ENGINE_ENV, "PYTHONPATH": str(ROOT / "tests/cpu_stand_ins")}
    python, *rest = words[3:]
    assert python == str(tmp_path / "cache" / "envs") + python.split("/envs", 1)[1]
    assert rest[:2] == ["-m", "sglang.launch_server"] and "--device" in rest


def test_pasting_the_printed_line_starts_the_server(
        fake_env: dict[str, str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """The SGLang double as the suite's stand-in: only the printed environment puts it
    on the path, so the paste works only if the line is whole."""
    import sys

    suite = tmp_path / "pasted.toml"
    suite.write_text(SUITE.format(stand_in=FAKE))
    assert main(["run", str(suite), "--dry-run", "--engine-python", sys.executable]) == 0
    line = _launch_line(capsys.readouterr().out)
    assert "sk-PLANTED-1" not in line and "hf_PLANTED_2" not in line  # redacted
    assert f"PYTHONPATH={FAKE}" in line and "FAKE_SGLANG_MODE=ok" in line
    # pasted, with the redacted values filled in by hand (as a user would) and the port
    # placeholder replaced by a free one
    port = free_port()
    pasted = (line.replace("<redacted>", "sk-PLANTED-1", 1).replace("<redacted>", "hf", 1)
              .replace("--port 30000", f"--port {port}"))
    shell_env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    server = subprocess.Popen(["bash", "-c", f"exec {pasted}"], cwd=ROOT, env=shell_env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              start_new_session=True)
    try:
        wait_serving(server, port, within_s=60, every_s=0.1)
    finally:
        from harness.run.launch import kill_tree

        kill_tree(server.pid)
