"""What a run started, and how it dies with the harness, whatever kills the harness.

A SIGKILL (an OOM kill, a CI job's hard cancellation, a timed-out runner) runs none of
the harness's teardown, and a server started in a session of its own would outlive it,
holding its port and, on a GPU host, its memory. So every process tree the harness
launches (`launch.Server`: every engine, and each node of `schedulers.local`) and every
Slurm job it submits (`schedulers.slurm`) is registered here:

- the tree's processes carry `HARNESS_LAUNCHED_BY=<harness pid>-<start time>` in their
  environment (inherited by every child, also one that leaves the process group with
  setsid), which is how they are found after their parents died;
- a watchdog (`python -m harness.run.lifeline`, in a session of its own) holds the read
  end of a pipe whose write end only the harness holds. The kernel closes it when the
  harness dies, by any signal; at that end of file the watchdog ends every process that
  carries the harness's mark (SIGTERM, then SIGKILL after `END_GRACE_S`) and cancels
  the Slurm jobs still listed (`scancel`), saying so on stderr and in each server's log.
  It blocks on the pipe: no polling;
- the ledger `<results>/.launched/<mark>.json` lists the same (the trees' pids, ports,
  commands and logs, the jobs), so that the next `harness run` on that results folder
  ends what a dead harness left when its watchdog could not (killed with it), and says
  what it ended. A harness that stops in order leaves no ledger.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import psutil

from harness.files import atomic_write_text
from harness.results.layout import LAUNCHED_DIR

MARK_ENV = "HARNESS_LAUNCHED_BY"  # in every launched process's environment
END_GRACE_S = 5.0  # SIGTERM, then SIGKILL: a dead harness's tree ends within seconds
GONE_POLL_S = 0.02  # how often an ending process is looked at
SCANCEL_TIMEOUT_S = 30.0
JOB_ID = re.compile(r"[0-9]+(_[0-9]+)?")  # sbatch --parsable's id (an array task's too)
PACKAGE_ROOT = Path(__file__).resolve().parents[2]  # for the watchdog's `-m`


@dataclass
class Tree:
    """A launched process tree: its first process (its process group), port, command
    (as recorded: secrets redacted) and log."""

    pid: int
    port: int
    command: str
    log: str


@dataclass
class Job:
    """A submitted Slurm job (ended with the `scancel` on PATH: a ledger names no program
    to run, and an id that is not a job id is never passed on)."""

    job_id: str


@dataclass
class Ledger:
    """What one harness process started and has not ended yet."""

    harness_pid: int
    harness_started: float  # its create time: a pid reused later is not it
    mark: str  # MARK_ENV's value in its trees
    trees: list[Tree] = field(default_factory=list)
    jobs: list[Job] = field(default_factory=list)
    file: str = ""  # where it is kept (the results folder's `.launched/`), if anywhere

    @classmethod
    def of(cls, data: object) -> Ledger:
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        return cls(int(data["harness_pid"]), float(data["harness_started"]),
                   str(data["mark"]), [Tree(**tree) for tree in data.get("trees", [])],
                   [Job(**job) for job in data.get("jobs", [])], str(data.get("file", "")))

    def text(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    def harness_alive(self) -> bool:
        with contextlib.suppress(psutil.Error):
            return abs(psutil.Process(self.harness_pid).create_time()
                       - self.harness_started) < 0.01
        return False


# ------------------------------------------------------------------ ending a process tree


def end_processes(processes: Sequence[psutil.Process], grace_s: float) -> list[int]:
    """SIGTERM (and SIGCONT: a stopped process acts on SIGTERM only once resumed) each,
    SIGKILL those alive after `grace_s`; returns the pids killed hard."""
    for process in processes:
        with contextlib.suppress(psutil.Error):
            process.terminate()
            process.resume()
    alive = wait_gone(processes, grace_s)
    for process in alive:
        with contextlib.suppress(psutil.Error):
            process.kill()
    wait_gone(alive, grace_s)
    return [process.pid for process in alive]


def gone(process: psutil.Process) -> bool:
    """Exited: no longer running (or its pid reused), or a zombie, which holds nothing and
    waits only for its parent to reap it."""
    try:
        return not process.is_running() or process.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True
    except psutil.Error:
        return False


def wait_gone(processes: Iterable[psutil.Process], timeout_s: float) -> list[psutil.Process]:
    """Wait up to `timeout_s` for every process to be `gone`; returns those still alive.
    Not psutil.wait_procs: it waits on a zombie that is not our child until its parent
    reaps it, a second a round (a stopped server's orphans, re-parented, took 1.5 s)."""
    deadline = time.monotonic() + timeout_s
    alive = [process for process in processes if not gone(process)]
    while alive and time.monotonic() < deadline:
        time.sleep(GONE_POLL_S)
        alive = [process for process in alive if not gone(process)]
    return alive


def marked(mark: str) -> list[psutil.Process]:
    """Every process of this user whose environment carries `mark` (MARK_ENV): a launched
    tree, its children re-parented to init and those that left its session included."""
    found = []
    # A Process made now for each pid, not process_iter's: psutil keeps the one it made for
    # a pid across calls, and one made before the pid was reused reads the new process's
    # environment (the mark matches) while refusing to signal it, its identity being the
    # old process's: the leftover would be reported ended and left running.
    for pid in psutil.pids():
        with contextlib.suppress(psutil.Error):
            process = psutil.Process(pid)
            if process.environ().get(MARK_ENV) == mark:
                found.append(process)
    return found


def _label(process: psutil.Process) -> str:
    with contextlib.suppress(psutil.Error):
        return f"{process.name()} (pid {process.pid})"
    return f"pid {process.pid}"


def end_ledger(ledger: Ledger, why: str, grace_s: float = END_GRACE_S) -> list[str]:
    """End what `ledger` lists (its marked processes, its Slurm jobs); returns what was
    ended, one line each, for a user (empty when nothing was left)."""
    lines = []
    processes = marked(ledger.mark)
    if processes:
        labels = [_label(process) for process in processes]
        hard = end_processes(processes, grace_s)
        where = "; ".join(f"server pid {tree.pid} on port {tree.port} (log {tree.log})"
                          for tree in ledger.trees) or "a launched server"
        lines.append(f"{why}: ended {len(processes)} process(es) of {where}: "
                     f"{', '.join(labels)}"
                     + (f" ({len(hard)} needed SIGKILL)" if hard else ""))
    scancel = shutil.which("scancel")
    for job in ledger.jobs:
        if JOB_ID.fullmatch(job.job_id) is None:
            lines.append(f"{why}: {job.job_id!r} is not a Slurm job id: left alone")
            continue
        if scancel is None:
            lines.append(f"{why}: Slurm job {job.job_id} left running: scancel not found "
                         "on PATH")
            continue
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            done = subprocess.run([scancel, job.job_id], capture_output=True, text=True,
                                  timeout=SCANCEL_TIMEOUT_S, check=False)
            lines.append(f"{why}: Slurm job {job.job_id} cancelled" if done.returncode == 0
                         else f"{why}: scancel {job.job_id} failed: "
                              f"{(done.stderr or done.stdout).strip()}")
    return lines


# ---------------------------------------------------------------------- the harness's side


class Lifeline:
    """This harness process's ledger and watchdog (one per process: `lifeline()`)."""

    def __init__(self) -> None:
        me = psutil.Process()
        self.ledger = Ledger(me.pid, me.create_time(), f"{me.pid}-{me.create_time():.3f}")
        self._pipe: int | None = None  # the write end; the kernel closes it at our death
        self._watchdog: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()

    @property
    def mark_env(self) -> dict[str, str]:
        """What a launched tree's environment carries (MARK_ENV)."""
        return {MARK_ENV: self.ledger.mark}

    def keep_ledger_in(self, results: Path) -> None:
        """Keep the ledger in this results folder (`.launched/`), for the next run."""
        with self._lock:
            self.ledger.file = str(Path(results) / LAUNCHED_DIR / f"{self.ledger.mark}.json")
            self._changed()

    def started_tree(self, pid: int, port: int, command: Sequence[str], log: Path) -> None:
        with self._lock:
            self.ledger.trees.append(Tree(pid, port, " ".join(command)[:500], str(log)))
            self._changed()

    def ended_tree(self, pid: int) -> None:
        with self._lock:
            self.ledger.trees = [tree for tree in self.ledger.trees if tree.pid != pid]
            self._changed()

    def started_job(self, job_id: str) -> None:
        with self._lock:
            self.ledger.jobs.append(Job(job_id))
            self._changed()

    def ended_job(self, job_id: str) -> None:
        with self._lock:
            self.ledger.jobs = [job for job in self.ledger.jobs if job.job_id != job_id]
            self._changed()

    def arm(self) -> None:
        """The watchdog running, before anything is launched: a process started and not
        yet listed carries the mark, which the watchdog looks for at the end."""
        with self._lock:
            if self._pipe is None:
                self._arm()

    def _changed(self) -> None:
        listed = bool(self.ledger.trees or self.ledger.jobs)
        if listed and self._pipe is None:
            self._arm()
        if self._pipe is not None:
            with contextlib.suppress(OSError):  # a dead watchdog: the ledger still holds it
                os.write(self._pipe, (self.ledger.text() + "\n").encode())
        if not self.ledger.file:
            return
        path = Path(self.ledger.file)
        with contextlib.suppress(OSError):
            if listed:
                atomic_write_text(path, self.ledger.text() + "\n")
            else:
                path.unlink(missing_ok=True)

    def _arm(self) -> None:
        """Start the watchdog: it reads the ledger's lines from the pipe until the end of
        file, which comes when this process ends (however it ends). The ledger as it is
        goes first: its mark is what the watchdog looks for."""
        read_end, write_end = os.pipe()  # both non-inheritable: no launched tree holds them
        env = {name: value for name, value in os.environ.items() if name != MARK_ENV}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PACKAGE_ROOT),
                                                          env.get("PYTHONPATH")]))
        try:
            self._watchdog = subprocess.Popen(
                [sys.executable, "-m", "harness.run.lifeline"], stdin=read_end,
                stdout=subprocess.DEVNULL, env=env, start_new_session=True)
        except OSError:
            os.close(write_end)
            return  # no watchdog: the ledger still lets the next run end the leftovers
        finally:
            os.close(read_end)
        self._pipe = write_end
        with contextlib.suppress(OSError):
            os.write(self._pipe, (self.ledger.text() + "\n").encode())


_ONE: Lifeline | None = None
_ONE_LOCK = threading.Lock()


def lifeline() -> Lifeline:
    """This process's lifeline (made on first use)."""
    global _ONE
    with _ONE_LOCK:
        if _ONE is None or _ONE.ledger.harness_pid != os.getpid():  # a fork has its own
            _ONE = Lifeline()
        return _ONE


def end_leftovers(results: Path) -> list[str]:
    """Before a launch: end what dead harnesses left, as their ledgers in this results
    folder list it (a ledger of a harness still running is left alone); returns what was
    ended, for the run to say."""
    folder = Path(results) / LAUNCHED_DIR
    lines: list[str] = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            ledger = Ledger.of(json.loads(path.read_text()))
        except (OSError, ValueError, KeyError, TypeError) as error:
            lines.append(f"{path}: not a ledger ({error}); removed")
            path.unlink(missing_ok=True)
            continue
        if ledger.harness_alive():
            continue
        lines += end_ledger(ledger, f"a run that died (harness pid {ledger.harness_pid}, "
                                    f"{path}) left a server running")
        path.unlink(missing_ok=True)
    return lines


# --------------------------------------------------------------------- the watchdog's side


def watch(lines: Iterable[bytes]) -> None:
    """The watchdog: the latest ledger from `lines` (the pipe) until its end; then, the
    harness being gone, end what the ledger still lists and remove its file."""
    ledger: Ledger | None = None
    for line in lines:
        with contextlib.suppress(ValueError, KeyError, TypeError):
            ledger = Ledger.of(json.loads(line))
    if ledger is None:
        return
    ended = end_ledger(ledger, f"harness (pid {ledger.harness_pid}) died")
    for text in ended:
        with contextlib.suppress(OSError):
            print(f"harness watchdog: {text}", file=sys.stderr, flush=True)
        for tree in ledger.trees:
            with contextlib.suppress(OSError), open(tree.log, "a") as log:
                log.write(f"[harness] watchdog: {text}\n")
    if ledger.file:  # ended: nothing left for the next run
        with contextlib.suppress(OSError):
            Path(ledger.file).unlink(missing_ok=True)


def main() -> None:
    # Ctrl-C in the harness's terminal, or its hang-up, is the harness's to handle
    for signum in (signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, signal.SIG_IGN)
    watch(sys.stdin.buffer)


if __name__ == "__main__":
    main()
