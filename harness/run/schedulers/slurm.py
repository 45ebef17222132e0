"""A topology launched as a Slurm job: `harness run SUITE --launcher slurm`.

The harness writes a batch script and submits it with `sbatch` (one task per node, the
suite's `nnodes`); the script, on the job's first node, picks the HTTP and rendezvous
ports there, writes the endpoint to the run folder, and starts the server as one job step
(`srun`), every node running the engine's own multi-node launch with its `--node-rank`
from `SLURM_NODEID` (SGLang's documented Slurm recipe). The harness waits for the job to
start (bounded: a job still pending after `--slurm-start-timeout` is cancelled and the run
ends with exit 3 and Slurm's reason), reads the endpoint, waits for readiness, drives and
measures it as a local server, watches the job (a job that ends mid-run ends the run
within seconds, rows kept), and cancels the job at the end (`scancel`), waiting until Slurm
no longer lists it. A harness that dies without its teardown (SIGKILL) has the job cancelled
by its watchdog, or by the next run on its results folder (`harness.run.lifeline`).
`--dry-run` prints the batch script and the `sbatch` line.

The engine environment and the run folder must be on a filesystem the nodes share (the
script runs the build's interpreter by its path and writes into the run folder). The
server binds the first node's own address (never every interface). Secrets never enter
the script: a word of the launch line that holds one (harness.secrets says which) is passed
to the job in its environment (`HARNESS_SECRET_<n>`) and the script refers to the variable.
The job writes its output to server.log itself: the harness redacts that file when the job
ends.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

from harness.engines.interface import Placement
from harness.errors import BadInput, EngineError
from harness.run.launch import log_tail, poll_ready, signals_deferred, started
from harness.run.lifeline import lifeline
from harness.run.schedulers.deployment import Launchable, secret_variable, secret_words
from harness.secrets import redact_text

if TYPE_CHECKING:
    from harness.suite.model import Suite
    from harness.suite.serving import Topology

ENDPOINT_FILE = "endpoint.json"
SCRIPT_FILE = "job.sbatch"
POLL_S = 1.0
# How often a running job's state is read while it serves: twice within the driver's grace
# after a failed request (drive.DEATH_GRACE_S), so a cancelled job is named as the cause.
STATE_EVERY_S = 0.5
CANCEL_WAIT_S = 60.0
INSTALL_HINT = ("install Slurm's client commands (Debian/Ubuntu: apt-get install "
                "slurm-client; they read the cluster from /etc/slurm/slurm.conf or "
                "$SLURM_CONF), or launch on this host without --launcher")
# The arguments of a launch line the script fills in on the job's nodes.
NODE_VALUES = {"--host": "$HEAD_ADDR", "--port": "$PORT", "--node-rank": "$SLURM_NODEID",
               "--dist-init-addr": "$HEAD_ADDR:$DIST_PORT",
               "--master-addr": "$HEAD_ADDR", "--master-port": "$DIST_PORT"}


@dataclass(frozen=True)
class SlurmOptions:
    """`--slurm-*` of `harness run`: where and how long the job may run."""

    partition: str | None = None
    time_limit: str | None = None  # sbatch --time
    account: str | None = None
    extra: tuple[str, ...] = ()  # more sbatch options, as given (`--slurm-option=--qos=x`)
    start_timeout_s: float = 600.0  # a job pending longer is cancelled: exit 3
    gpus_per_node: int = 0


def commands() -> dict[str, str]:
    """The Slurm commands the launcher runs, each found on PATH (BadInput naming the
    missing ones and how to install them)."""
    found = {name: shutil.which(name) for name in ("sbatch", "squeue", "scancel", "sinfo",
                                                     "scontrol")}
    missing = [name for name, path in found.items() if path is None]
    if missing:
        raise BadInput(f"--launcher slurm: {', '.join(missing)} not found on PATH; "
                       + INSTALL_HINT)
    return {name: str(path) for name, path in found.items()}


def _run(command: Sequence[str], env: Mapping[str, str] | None = None,
         timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(list(command), capture_output=True, text=True, timeout=timeout,
                              env=None if env is None else {**os.environ, **env},
                              check=False)
    except subprocess.TimeoutExpired:
        raise EngineError(f"`{shlex.join(command)}` did not answer in {timeout:g} s: is "
                          "slurmctld reachable?") from None
    except OSError as error:
        raise EngineError(f"cannot run {command[0]}: {error}") from None


def node_template(command: Sequence[str], kind: str) -> tuple[str, dict[str, str]]:
    """Node 0's launch line as a shell line for every node: the values a node fills in
    (`NODE_VALUES`) as variable references, each word holding a secret (of engine `kind`'s
    line) as `$HARNESS_SECRET_<n>` (returned with its value, to pass in the job's
    environment, never in the script)."""
    words: list[str] = []
    hidden: dict[str, str] = {}
    secret = secret_words(command, kind)
    previous = ""
    for word, is_secret in zip(command, secret, strict=True):
        if previous in NODE_VALUES:
            words.append(f'"{NODE_VALUES[previous]}"')
        elif is_secret:
            name = f"HARNESS_SECRET_{len(hidden)}"
            hidden[name] = word
            words.append(f'"${name}"')
        else:
            words.append(shlex.quote(word))
        previous = word
    return " ".join(words), hidden


def batch_script(job_name: str, nnodes: int, line: str, env: Mapping[str, str],
                 python: str, run_dir: Path, options: SlurmOptions) -> str:
    """The sbatch script: resources as #SBATCH lines, then the first node picks its ports,
    writes the endpoint, and starts the server on every node as one job step."""
    directives = [f"--job-name={job_name}", f"--nodes={nnodes}", "--ntasks-per-node=1",
                  f"--output={run_dir / 'server.log'}", f"--chdir={run_dir}"]
    if options.gpus_per_node:
        directives.append(f"--gres=gpu:{options.gpus_per_node}")
    if options.partition:
        directives.append(f"--partition={options.partition}")
    if options.time_limit:
        directives.append(f"--time={options.time_limit}")
    if options.account:
        directives.append(f"--account={options.account}")
    exports = "\n".join(f"export {name}={shlex.quote(value)}" for name, value in env.items())
    endpoint = run_dir / ENDPOINT_FILE
    return "\n".join([
        "#!/bin/bash",
        *(f"#SBATCH {shlex.quote(d)}" for d in [*directives, *options.extra]),
        "# Written by `harness run --launcher slurm`: the server as one job step, every",
        "# node running the engine's own multi-node launch (--node-rank from SLURM_NODEID).",
        "set -euo pipefail",
        exports,
        'HEAD=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)',
        'HEAD_ADDR=$(getent ahostsv4 "$HEAD" | awk \'{print $1; exit}\')',
        f"read -r PORT DIST_PORT < <({shlex.quote(python)} -c 'import socket\n"
        "def free():\n    s = socket.socket(); s.bind((\"\", 0)); return s.getsockname()[1]\n"
        "print(free(), free())')",
        f"printf '{{\"host\": \"%s\", \"port\": %s, \"job\": \"%s\"}}\\n' \"$HEAD_ADDR\" \"$PORT\" "
        f"\"$SLURM_JOB_ID\" > {shlex.quote(str(endpoint))}.tmp",
        f"mv {shlex.quote(str(endpoint))}.tmp {shlex.quote(str(endpoint))}",
        "export HEAD_ADDR PORT DIST_PORT",
        f"srun --nodes={nnodes} --ntasks-per-node=1 --kill-on-bad-exit=1 bash -c "
        + shlex.quote(f"exec {line}"),
        "",
    ])


def check_cluster(tools: Mapping[str, str], nnodes: int, options: SlurmOptions) -> None:
    """More nodes than the partition has is bad input, said before anything is built or
    submitted (sinfo's node count of `--slurm-partition`, else of every partition)."""
    command = [tools["sinfo"], "-h", "-o", "%D %a"]
    if options.partition:
        command += ["-p", options.partition]
    done = _run(command)
    if done.returncode != 0:
        raise EngineError(f"sinfo failed: {done.stderr.strip() or done.stdout.strip()} "
                          "(is slurmctld running and $SLURM_CONF right?)")
    rows = [line.split() for line in done.stdout.splitlines() if line.strip()]
    if not rows:
        where = f"partition {options.partition}" if options.partition else "any partition"
        raise BadInput(f"--launcher slurm: sinfo lists no nodes in {where}")
    nodes = sum(int(row[0]) for row in rows if row and row[0].isdigit())
    if options.partition is None:
        nodes = max(int(row[0]) for row in rows if row and row[0].isdigit())
    if nodes < nnodes:
        where = f"partition {options.partition}" if options.partition else \
            "the largest partition"
        raise BadInput(f"the suite needs {nnodes} nodes (topology.nnodes); {where} has "
                       f"{nodes} (sinfo): give --slurm-partition of a larger partition or "
                       "lower topology.nnodes")


def preflight(topology: Topology, options: SlurmOptions) -> dict[str, str]:
    """What a Slurm launch needs before any build: the commands, a partition with enough
    nodes, a topology the launcher runs. Returns the commands' paths."""
    tools = commands()
    check_topology(topology)
    check_cluster(tools, topology.nnodes, options)
    return tools


def check_topology(topology: Topology) -> None:
    """The launcher starts one server over its nodes; a split is two and a router."""
    if topology.disaggregation is not None:
        raise BadInput("--launcher slurm launches one server (over nnodes); a "
                       "prefill/decode split runs behind the engine's router: start it and "
                       "measure the router with --server URL")


@dataclass
class JobSpec:
    """What the job serves and where its answers go: the launch's ServerSpec fields."""

    base_url: str = ""
    log_path: Path = Path()
    port: int = 0


@dataclass
class SlurmJob:
    """One submitted job: submit, wait for it to start, find its endpoint, watch it, cancel
    it. Used as a context manager so that the job is cancelled on every exit path."""

    script: str
    run_dir: Path
    nnodes: int
    options: SlurmOptions
    ready_paths: tuple[str, ...]
    launch_timeout_s: float
    job_env: dict[str, str] = field(default_factory=dict)
    tools: dict[str, str] = field(default_factory=dict)
    job_id: str | None = None
    ready_after_s: float | None = None
    spec: JobSpec = field(default_factory=JobSpec)
    _state: tuple[float, str, str] = (0.0, "", "")

    def __post_init__(self) -> None:
        self.spec.log_path = self.run_dir / "server.log"

    @property
    def base_url(self) -> str:
        return self.spec.base_url

    script_name = SCRIPT_FILE

    # -- before the job --------------------------------------------------------------
    def check_cluster(self) -> None:
        check_cluster(self.tools, self.nnodes, self.options)

    def submit(self) -> str:
        path = self.run_dir / SCRIPT_FILE
        path.write_text(self.script)
        done = _run([self.tools["sbatch"], "--parsable", str(path)],
                    env={**self.job_env, "SBATCH_EXPORT": "ALL"})
        if done.returncode != 0:
            message = done.stderr.strip() or done.stdout.strip()
            raise BadInput(f"sbatch refused the job: {message}")
        self.job_id = done.stdout.strip().split(";", 1)[0]
        # cancelled by the harness's watchdog if the harness dies (harness.run.lifeline)
        lifeline().started_job(self.job_id)
        return self.job_id

    # -- the job's state ---------------------------------------------------------------
    def state(self) -> tuple[str, str]:
        """(state, reason) as squeue shows the job; ("", "") once Slurm no longer lists
        it; for an ended job, scontrol's JobState and Reason while it still knows it."""
        done = _run([self.tools["squeue"], "-h", "-j", str(self.job_id), "-o", "%T|%r"])
        line = done.stdout.strip().splitlines()[:1]
        if done.returncode == 0 and line:
            state, _, reason = line[0].partition("|")
            return state.strip(), reason.strip()
        shown = _run([self.tools["scontrol"], "show", "job", str(self.job_id)])
        fields = dict(part.split("=", 1) for part in shown.stdout.split() if "=" in part)
        return fields.get("JobState", ""), fields.get("Reason", "")

    def wait_started(self) -> None:
        """Until the job runs; a job still pending after the start timeout is cancelled
        (exit 3, Slurm's reason); a job that ended before running, likewise."""
        deadline = time.monotonic() + self.options.start_timeout_s
        while True:
            state, reason = self.state()
            if state in ("RUNNING", "COMPLETING"):
                return
            if state not in ("PENDING", "CONFIGURING", "REQUEUED", "RESIZING"):
                raise EngineError(f"Slurm job {self.job_id} ended before it ran: "
                                  f"{state or 'gone'} ({reason or 'no reason given'})")
            if time.monotonic() > deadline:
                raise EngineError(f"Slurm job {self.job_id} did not start within "
                                  f"{self.options.start_timeout_s:g} s: {state} (reason: "
                                  f"{reason or 'none given'}); it was cancelled "
                                  "(--slurm-start-timeout sets the wait)")
            time.sleep(POLL_S)

    def death(self) -> str | None:
        """None while the job runs (its state read every few seconds); else how it ended,
        with its log's tail."""
        now = time.monotonic()
        if now - self._state[0] >= STATE_EVERY_S:
            self._state = (now, *self.state())
        state, reason = self._state[1], self._state[2]
        if state in ("RUNNING", "CONFIGURING"):  # COMPLETING: its processes are ending
            return None
        return (f"Slurm job {self.job_id} is {state or 'gone'} ({reason or 'no reason'}); "
                f"last lines of {self.spec.log_path}:\n{log_tail(self.spec.log_path)}")

    def wait_ready(self) -> float:
        """The endpoint the first node wrote, then the engine's readiness routes there."""
        started = time.monotonic()
        deadline = started + self.launch_timeout_s
        endpoint = self.run_dir / ENDPOINT_FILE
        while not endpoint.is_file():
            self._check_alive(deadline, "the endpoint file")
            time.sleep(POLL_S)
        found = json.loads(endpoint.read_text())
        self.spec.base_url = f"http://{found['host']}:{int(found['port'])}"
        self.spec.port = int(found["port"])
        poll_ready(self.base_url, self.ready_paths,
                   lambda waiting_for: self._check_alive(deadline, waiting_for), POLL_S / 4)
        self.ready_after_s = time.monotonic() - started
        return self.ready_after_s

    def _check_alive(self, deadline: float, waiting_for: str) -> None:
        self._state = (0.0, "", "")  # read afresh
        if (death := self.death()) is not None:
            raise EngineError(death.replace("is ", "ended before it was ready: ", 1))
        if time.monotonic() > deadline:
            raise EngineError(f"Slurm job {self.job_id} not ready after "
                              f"{self.launch_timeout_s:g} s (waiting for {waiting_for}); "
                              f"last lines of {self.spec.log_path}:\n"
                              f"{log_tail(self.spec.log_path)}")

    # -- the end -----------------------------------------------------------------------
    def cancel(self) -> None:
        """scancel, then wait until Slurm lists the job no more (or shows it ended)."""
        if self.job_id is None:
            return
        _run([self.tools["scancel"], str(self.job_id)])
        deadline = time.monotonic() + CANCEL_WAIT_S
        while time.monotonic() < deadline:
            state, _ = self.state()
            if state in ("", "CANCELLED", "COMPLETED", "FAILED", "TIMEOUT", "NODE_FAIL",
                         "OUT_OF_MEMORY", "PREEMPTED", "BOOT_FAIL", "DEADLINE"):
                break
            time.sleep(POLL_S / 2)
        lifeline().ended_job(self.job_id)
        self._redact_log()

    def _redact_log(self) -> None:
        """The job's output went straight to server.log: redacted there as a local server's
        log is line by line (harness.secrets)."""
        log = self.spec.log_path
        if not log.is_file():
            return
        with contextlib.suppress(OSError):
            text = log.read_bytes().decode("utf-8", "surrogateescape")
            shown = "".join(redact_text(line) for line in text.splitlines(keepends=True))
            log.write_bytes(shown.encode("utf-8", "surrogateescape"))

    def __enter__(self) -> SlurmJob:
        self.check_cluster()
        with signals_deferred():  # a Ctrl-C between submit and the id would orphan it
            self.submit()
        started(self.wait_started, self.cancel)
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        with signals_deferred():
            self.cancel()


def prepare(engine: Launchable, suite: Suite, env: Mapping[str, str], run_dir: Path,
            options: SlurmOptions, ready_paths: tuple[str, ...],
            tools: dict[str, str] | None = None) -> SlurmJob:
    """The job for the suite's topology: node 0's launch line templated for every node."""
    topology = suite.topology
    check_topology(topology)
    placement = Placement(node_rank=0, nnodes=topology.nnodes,
                          dist_init_addr="HEAD:1" if topology.nnodes > 1 else None)
    command = engine.command("HEAD", 1, placement)
    line, hidden = node_template(command, suite.engine.kind)
    options = SlurmOptions(**{**options.__dict__, "gpus_per_node": topology.gpus})
    clean_env = {}
    for name, value in env.items():
        if name == "CUDA_VISIBLE_DEVICES":  # Slurm's --gres sets the devices
            continue
        if secret_variable(name, value):
            hidden[name] = value  # the job inherits it from sbatch's environment
        else:
            clean_env[name] = value
    script = batch_script(f"harness-{suite.name}"[:60], topology.nnodes, line, clean_env,
                          engine.python, run_dir, options)
    return SlurmJob(script, run_dir, topology.nnodes, options, ready_paths,
                    suite.engine.launch_timeout_s, job_env=hidden, tools=tools or {})
