"""The Slurm launcher without a cluster: the batch script it writes (every node's line
from node 0's, secrets never in it), what it refuses before anything runs (Slurm not
installed, a bad option), and its dry run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.errors import BadInput
from harness.run.schedulers import slurm

ROOT = Path(__file__).resolve().parents[3]
SUITES = ROOT / "suites"


def test_node_values_and_secrets_become_variables() -> None:
    command = ["/env/bin/python", "-m", "sglang.launch_server", "--model-path", "/m",
               "--tp-size", "2", "--nnodes", "2", "--node-rank", "0", "--dist-init-addr",
               "HEAD:1", "--host", "HEAD", "--port", "1", "--api-key", "s3cret",
               "--served-model-name", "a b"]
    line, hidden = slurm.node_template(command, "sglang")
    assert '--node-rank "$SLURM_NODEID"' in line
    assert '--dist-init-addr "$HEAD_ADDR:$DIST_PORT"' in line
    assert '--host "$HEAD_ADDR" --port "$PORT"' in line
    assert '--api-key "$HARNESS_SECRET_0"' in line and "s3cret" not in line
    assert hidden == {"HARNESS_SECRET_0": "s3cret"}
    assert "--served-model-name 'a b'" in line  # every other word quoted for the shell


def test_the_batch_script_asks_for_one_task_per_node(tmp_path: Path) -> None:
    options = slurm.SlurmOptions(partition="gpu", time_limit="01:00:00", account="acct",
                                 extra=("--qos=high",), gpus_per_node=8)
    script = slurm.batch_script("harness-x", 2, "python -m x", {"A": "1 2"}, "/env/python",
                                tmp_path, options)
    for directive in ("--nodes=2", "--ntasks-per-node=1", "--gres=gpu:8", "--partition=gpu",
                      "--time=01:00:00", "--account=acct", "--qos=high"):
        assert f"#SBATCH {directive}" in script
    assert "export A='1 2'" in script
    assert "srun --nodes=2 --ntasks-per-node=1" in script
    assert str(tmp_path / slurm.ENDPOINT_FILE) in script
    checked = subprocess.run(["bash", "-n"], input=script, text=True, capture_output=True,
                             check=False)
    assert checked.returncode == 0, checked.stderr  # the shell reads it


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness", "run", *args], text=True,
                          capture_output=True, timeout=300, check=False,
                          env={**os.environ, **(env or {})})


def test_slurm_not_installed_is_bad_input_naming_what_to_install(tmp_path: Path) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    done = run_cli("tiny_dflash_cpu", "--launcher", "slurm", "--results", str(tmp_path),
                   env={"PATH": f"{empty}:{Path(sys.executable).parent}"})
    assert done.returncode == 2, done.stderr
    assert "sbatch" in done.stderr and "apt-get install slurm-client" in done.stderr
    assert "Traceback" not in done.stderr
    assert not list(tmp_path.rglob("run.json"))
    with pytest.raises(BadInput, match="not found on PATH"):
        old = os.environ["PATH"]
        os.environ["PATH"] = str(empty)
        try:
            slurm.commands()
        finally:
            os.environ["PATH"] = old


@pytest.mark.parametrize("option", ["qos=high", "--qos=a\n#SBATCH --x"])
def test_a_malformed_sbatch_option_is_refused(option: str, tmp_path: Path) -> None:
    done = run_cli("tiny_dflash_cpu", "--launcher", "slurm", f"--slurm-option={option}",
                   "--dry-run")
    assert done.returncode == 2 and "--slurm-option" in done.stderr


def test_the_dry_run_prints_the_script_without_secrets(tmp_path: Path) -> None:
    text = (SUITES / "tiny_ngram_sglang_cpu.toml").read_text().replace(
        "[topology]\ngpus = 0\n", "[topology]\ngpus = 0\ntp_size = 2\nnnodes = 2\n").replace(
        '"--skip-server-warmup",', '"--skip-server-warmup", "--api-key", "dry-run-k3y",')
    path = tmp_path / "two.toml"
    path.write_text(text)
    done = run_cli(str(path), "--launcher", "slurm", "--dry-run", "--sglang", "sglang==0.5.23",
                   "--slurm-partition", "gpu")
    assert done.returncode == 0, done.stderr
    assert "#SBATCH --nodes=2" in done.stdout and "#SBATCH --partition=gpu" in done.stdout
    assert '--node-rank "$SLURM_NODEID"' in done.stdout
    assert '$HARNESS_SECRET_0' in done.stdout
    assert "dry-run-k3y" not in done.stdout + done.stderr
