"""A one-node Slurm cluster on this host for the launcher's tests: Debian's slurm-wlm
(slurmctld, slurmd) and munge, each started here with a configuration of its own in a
temporary folder (its own ports, key, sockets and state), and stopped after; nothing of
the machine's own Slurm configuration is read or changed. `SLURM_CONF` points the client
commands (sbatch, squeue, scancel, sinfo, scontrol) at it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

DAEMONS = ("munged", "slurmctld", "slurmd")
START_TIMEOUT_S = 60.0


def missing() -> list[str]:
    """The programs this cluster needs that are not installed."""
    return [name for name in (*DAEMONS, "sbatch", "squeue", "scancel", "sinfo", "scontrol")
            if shutil.which(name) is None]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def config(folder: Path, node: str, cpus: int) -> str:
    return "\n".join([
        "ClusterName=harness-test",
        f"SlurmctldHost={node}(127.0.0.1)",
        "SlurmUser=root", "SlurmdUser=root",
        f"SlurmctldPort={_free_port()}", f"SlurmdPort={_free_port()}",
        "AuthType=auth/munge", f"AuthInfo=socket={folder / 'munge.sock'}",
        "CredType=cred/munge",
        f"StateSaveLocation={folder / 'state'}", f"SlurmdSpoolDir={folder / 'spool'}",
        f"SlurmctldPidFile={folder / 'slurmctld.pid'}",
        f"SlurmdPidFile={folder / 'slurmd.pid'}",
        f"SlurmctldLogFile={folder / 'slurmctld.log'}",
        f"SlurmdLogFile={folder / 'slurmd.log'}",
        # no cgroups in a container: processes tracked by their parentage
        "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none",
        "JobAcctGatherType=jobacct_gather/none", "MpiDefault=none",
        "SelectType=select/cons_tres", "SelectTypeParameters=CR_Core",
        "ReturnToService=2", "SchedulerType=sched/backfill", "MinJobAge=300",
        f"NodeName={node} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory=1000 State=UNKNOWN",
        f"PartitionName=debug Nodes={node} Default=YES MaxTime=INFINITE State=UP",
        "",
    ])


def _pid(path: Path) -> int | None:
    with contextlib.suppress(OSError, ValueError):
        return int(path.read_text().strip())
    return None


@contextlib.contextmanager
def cluster(folder: Path) -> Iterator[dict[str, str]]:
    """Start munged, slurmctld and slurmd; yield the environment for Slurm's clients;
    stop all three (and every job) on the way out."""
    for sub in ("state", "spool"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    key = folder / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o600)
    node = socket.gethostname()
    conf = folder / "slurm.conf"
    conf.write_text(config(folder, node, os.cpu_count() or 1))
    env = {**os.environ, "SLURM_CONF": str(conf)}
    started: list[Path] = []
    try:
        subprocess.run(["munged", "--force", "-S", str(folder / "munge.sock"),
                        f"--key-file={key}", f"--log-file={folder / 'munged.log'}",
                        f"--pid-file={folder / 'munged.pid'}",
                        f"--seed-file={folder / 'munged.seed'}"], check=True, env=env)
        started.append(folder / "munged.pid")
        for daemon in ("slurmctld", "slurmd"):
            subprocess.run([daemon, "-f", str(conf)], check=True, env=env)
            started.append(folder / f"{daemon}.pid")
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            shown = subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True,
                                   text=True, env=env, check=False)
            if shown.stdout.strip() in ("idle", "mix", "alloc"):
                break
            if time.monotonic() > deadline:
                logs = "\n".join((folder / f"{d}.log").read_text(errors="replace")[-2000:]
                                 for d in ("slurmctld", "slurmd") if
                                 (folder / f"{d}.log").exists())
                raise RuntimeError(f"the test cluster did not come up: sinfo says "
                                   f"{shown.stdout.strip()!r} {shown.stderr.strip()}\n{logs}")
            time.sleep(0.5)
        yield {"SLURM_CONF": str(conf)}
    finally:
        subprocess.run(["scancel", "--user", "root"], env=env, check=False,
                       capture_output=True)
        for pid_file in reversed(started):
            pid = _pid(pid_file)
            if pid is None:
                continue
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
            for _ in range(100):
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    break
                time.sleep(0.1)
            else:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
