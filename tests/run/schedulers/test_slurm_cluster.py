"""The Slurm launcher against a real one-node Slurm cluster (`nox -s slurm`: Debian's
slurm-wlm and munge, started by the fixture and stopped after). A suite runs through it to
its verdict with per-rank figures (the reference engine with two DP ranks), a job that
never starts is cancelled with Slurm's reason, a job cancelled mid-run ends the run in
seconds with its rows kept, a harness killed with SIGKILL has its job cancelled by its
watchdog (harness.run.lifeline), more nodes than the cluster has is refused before anything
is built, and nothing is ever left queued or running."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.run.schedulers import slurm_cluster

ROOT = Path(__file__).resolve().parents[3]
SUITES = ROOT / "suites"
SECRET = "slurm-test-key-5d1f"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    gone = slurm_cluster.missing()
    if gone:
        pytest.skip(f"Slurm is not installed here ({', '.join(gone)}): `nox -s slurm` "
                    "installs Debian's slurm-wlm and munge")
    with slurm_cluster.cluster(tmp_path_factory.mktemp("slurm")) as env:
        yield env


def queue(env: dict[str, str]) -> str:
    return subprocess.run(["squeue", "-h", "-o", "%i %T %r"], capture_output=True,
                          text=True, env={**os.environ, **env}, check=True).stdout.strip()


def suite_file(folder: Path, name: str, topology: str = "", questions: int = 20,
               extra: str = "") -> Path:
    text = (SUITES / "tiny_dflash_cpu.toml").read_text()
    text = text.replace('name = "tiny_dflash_cpu"', f'name = "{name}"')
    text = text.replace("questions = 100", f"questions = {questions}")
    text = text.replace("[topology]\ngpus = 0\n", f"[topology]\ngpus = 0\n{topology}\n")
    text = text.replace('launch_timeout_s = 300', f'launch_timeout_s = 600\n{extra}')
    path = folder / f"{name}.toml"
    path.write_text(text)
    return path


def harness(env: dict[str, str], *args: str, timeout: float = 900
            ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness", "run", *args, "--no-progress",
                           "--no-plot"], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **env, "HARNESS_REFERENCE_WORKERS": "1"},
                          check=False)


def record(results: Path) -> tuple[Path, dict]:
    [run_json] = list(results.glob("runs/*/*/run.json"))
    return run_json.parent, json.loads(run_json.read_text())


def test_a_suite_runs_as_a_slurm_job_with_per_rank_figures(cluster: dict[str, str],
                                                           tmp_path: Path) -> None:
    path = suite_file(tmp_path, "slurm_dp2", "dp_size = 2",
                      extra=f'extra_args = ["--api-key", "{SECRET}"]')
    done = harness(cluster, str(path), "--launcher", "slurm", "--results",
                   str(tmp_path / "results"))
    print(done.stdout[-3000:], done.stderr[-3000:])
    assert done.returncode == 0, done.stderr[-2000:]
    folder, run = record(tmp_path / "results")
    assert run["launch"]["launcher"].startswith("slurm job ")
    measurement = run["measurement"]
    ranks = measurement["per_rank"]
    assert [r["rank"] for r in ranks] == [0, 1]
    assert sum(r["verify_steps"] for r in ranks) == measurement["verify_steps"]
    assert sum(r["n_requests"] for r in ranks) == measurement["n_requests"]
    for rank in ranks:  # each rank's own counters, read from /server_info, equal its figure
        assert rank["server_reported_accept_length"] == pytest.approx(
            rank["accept_length_server_avg"], rel=1e-12)
    pooled = sum(r["accept_length_server_avg"] * r["verify_steps"] for r in ranks) / \
        measurement["verify_steps"]
    assert pooled == pytest.approx(measurement["accept_length_server_avg"], rel=1e-12)
    script = (folder / "job.sbatch").read_text()
    assert "srun" in script and "--dp-size 2" in script
    for written in [script, (folder / "server.log").read_text(errors="replace"),
                    (folder / "run.json").read_text(), done.stdout, done.stderr]:
        assert SECRET not in written
    assert queue(cluster) == ""  # cancelled at the end, nothing left


def test_a_job_that_never_starts_is_cancelled_with_slurms_reason(cluster: dict[str, str],
                                                                 tmp_path: Path) -> None:
    path = suite_file(tmp_path, "slurm_never")
    started = time.monotonic()
    done = harness(cluster, str(path), "--launcher", "slurm", "--slurm-start-timeout", "3",
                   "--slurm-option=--begin=now+3600", "--results", str(tmp_path / "r"))
    assert done.returncode == 3, done.stdout + done.stderr
    assert "did not start within 3 s" in done.stdout and "BeginTime" in done.stdout
    assert time.monotonic() - started < 300
    assert queue(cluster) == ""


def test_a_job_cancelled_mid_run_ends_the_run_with_its_rows(cluster: dict[str, str],
                                                            tmp_path: Path) -> None:
    path = suite_file(tmp_path, "slurm_killed", questions=100)
    results = tmp_path / "results"
    env = {**os.environ, **cluster}
    cancelled_at: list[float] = []

    def cancel_once_measuring() -> None:
        deadline = time.monotonic() + 800
        while time.monotonic() < deadline:
            rows = list(results.glob("runs/*/*/requests.jsonl"))
            if rows and rows[0].read_text().count("\n") >= 3:
                jobs = queue(cluster).split()
                if jobs:
                    subprocess.run(["scancel", jobs[0]], env=env, check=False)
                    cancelled_at.append(time.monotonic())
                    return
            time.sleep(0.2)

    watcher = threading.Thread(target=cancel_once_measuring, daemon=True)
    watcher.start()
    done = harness(cluster, str(path), "--launcher", "slurm", "--results", str(results))
    ended = time.monotonic()
    watcher.join(timeout=5)
    assert cancelled_at, done.stdout + done.stderr
    assert done.returncode == 3, done.stdout + done.stderr
    assert ended - cancelled_at[0] < 60
    folder, run = record(results)
    assert run["verdict"]["status"] == "error" and "Slurm job" in run["verdict"]["reasons"][0]
    assert (folder / "requests.jsonl").read_text().count("\n") >= 3  # the rows are kept
    assert queue(cluster) == ""


def test_a_harness_killed_with_sigkill_has_its_job_cancelled(cluster: dict[str, str],
                                                             tmp_path: Path) -> None:
    """No teardown of the harness runs; its watchdog sees the pipe close and runs scancel:
    the job is gone from the queue within seconds, and the watchdog says so."""
    path = suite_file(tmp_path, "slurm_sigkill")
    job = subprocess.Popen(
        [sys.executable, "-m", "harness", "run", str(path), "--launcher", "slurm",
         "--slurm-start-timeout", "600", "--slurm-option=--begin=now+3600", "--results",
         str(tmp_path / "r"), "--no-progress", "--no-plot"],
        env={**os.environ, **cluster}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        text=True, start_new_session=True)
    deadline = time.monotonic() + 300
    while not queue(cluster):  # submitted: pending until its begin time
        assert job.poll() is None and time.monotonic() < deadline, job.communicate()[1]
        time.sleep(0.2)
    job_id = queue(cluster).split()[0]
    job.kill()
    job.wait(timeout=10)
    killed = time.monotonic()
    while queue(cluster) and time.monotonic() - killed < 15:
        time.sleep(0.2)
    assert queue(cluster) == ""
    assert job.stderr is not None
    said = job.stderr.read()  # the watchdog's line, on the stderr it inherited
    assert f"Slurm job {job_id} cancelled" in said, said


def test_more_nodes_than_the_cluster_has_is_refused_before_any_build(
        cluster: dict[str, str], tmp_path: Path) -> None:
    text = (SUITES / "tiny_ngram_sglang_cpu.toml").read_text().replace(
        "[topology]\ngpus = 0\n", "[topology]\ngpus = 0\ntp_size = 2\nnnodes = 2\n")
    path = tmp_path / "two_nodes.toml"
    path.write_text(text)
    started = time.monotonic()
    done = harness(cluster, str(path), "--launcher", "slurm", "--sglang", "sglang==0.5.23",
                   "--results", str(tmp_path / "r"), timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "needs 2 nodes (topology.nnodes); the largest partition has 1" in done.stderr
    assert time.monotonic() - started < 60
    assert not (tmp_path / "r").exists() or not list((tmp_path / "r").rglob("run.json"))
    assert queue(cluster) == ""
