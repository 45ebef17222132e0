"""Launch: run an engine server as a process tree, wait until it serves, kill it all.

The server gets its own process group and session (so a Ctrl-C in the
terminal reaches the harness, which then tears the server down in order),
binds 127.0.0.1 on a free port, and logs to the run's `server.log`.
Teardown kills every descendant: SGLang starts a tokenizer manager, one
scheduler per TP rank and a detokenizer, and an orphan keeps GPU memory.
A harness killed with no teardown (SIGKILL) takes the tree with it through
`harness.run.lifeline` (its watchdog, its ledger, the mark every process carries).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType, TracebackType
from typing import IO, Protocol

import httpx
import psutil

from harness.errors import EngineError
from harness.run.lifeline import end_processes, lifeline
from harness.secrets import redact_text

LOOPBACK = "127.0.0.1"
POLL_INTERVAL_S = 0.05
TERMINATE_GRACE_S = 10.0
LOG_TAIL_LINES = 40
# what `signal.signal` answers and takes: a function, SIG_DFL/SIG_IGN, or None (not set by Python)
Handler = Callable[[int, FrameType | None], object] | int | None


def free_port(host: str = LOOPBACK) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


def poll_ready(base_url: str, paths: Sequence[str], check_alive: Callable[[str], None],
               interval_s: float) -> None:
    """GET each of `paths` in turn until it answers 200, `check_alive(the path waited for)`
    before each try (it raises EngineError once the server died or its time is up)."""
    pending = list(paths)
    # A readiness probe answers fast or not at all: a short read timeout keeps the
    # liveness and deadline checks running (a stopped server accepts TCP connections but
    # never answers).
    with httpx.Client(base_url=base_url, timeout=httpx.Timeout(5.0, connect=1.0),
                      trust_env=False) as client:
        while pending:
            check_alive(pending[0])
            try:
                if client.get(pending[0]).status_code == 200:
                    pending.pop(0)
                    continue
            except httpx.HTTPError:
                pass
            time.sleep(interval_s)


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:]) or "(log is empty)"


@dataclass
class ServerSpec:
    command: Sequence[str]
    log_path: Path
    port: int
    host: str = LOOPBACK
    env: Mapping[str, str] = field(default_factory=dict)
    launch_timeout_s: float = 600.0
    # SGLang answers 200 here once a one-token generation works; 503 while starting.
    # (Its /health generates too unless SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION=0.)
    ready_paths: tuple[str, ...] = ("/health_generate",)
    poll_interval_s: float = POLL_INTERVAL_S

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"


def describe_exit(code: int) -> str:
    """`-9` -> `signal 9 (SIGKILL)`; `1` -> `code 1`."""
    if code < 0:
        try:
            return f"signal {-code} ({signal.Signals(-code).name})"
        except ValueError:
            return f"signal {-code}"
    return f"code {code}"


class _RedactingPump(threading.Thread):
    """Copies the server's output to its log, line by line, redacted (harness.secrets: the
    suite's values, registered at its load, and every credential's shape); bytes that are
    not UTF-8 pass as they came."""

    def __init__(self, source: IO[bytes], sink: IO[bytes]) -> None:
        super().__init__(name="server-log", daemon=True)
        self.source, self.sink = source, sink

    def run(self) -> None:
        for line in iter(self.source.readline, b""):
            text = redact_text(line.decode("utf-8", "surrogateescape"))
            self.sink.write(text.encode("utf-8", "surrogateescape"))
            self.sink.flush()


@contextlib.contextmanager
def signals_deferred() -> Iterator[None]:
    """Hold SIGINT and SIGTERM until the block ends, then act on the first one as before.

    A teardown cut short by a second Ctrl-C or CI's SIGTERM would leave the rest of the
    server tree running (an orphan holds GPU memory). Handlers are swapped rather than the
    signals masked: Python runs its handlers in the main thread whichever thread the OS
    delivered the signal to. Outside the main thread signals are not ours to touch.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []
    previous: dict[int, Handler] = {}
    try:
        # one by one inside the try: a signal landing between the two swaps still has the
        # first handler restored (else a later Ctrl-C would be held for ever)
        for signum in (signal.SIGINT, signal.SIGTERM):
            previous[signum] = signal.signal(signum, lambda number, _frame: held.append(number))
        yield
    finally:
        for held_signal, handler in previous.items():
            signal.signal(held_signal, handler)
        if held:
            handler = previous[held[0]]
            if callable(handler):
                handler(held[0], None)
            elif handler == signal.SIG_DFL:
                signal.raise_signal(held[0])


def started(start: Callable[[], object], undo: Callable[[], object]) -> None:
    """`start()`; where it raises (Ctrl-C included), `undo()` first, so that a launch cut
    short leaves nothing running."""
    try:
        start()
    except BaseException:
        undo()
        raise


def kill_tree(pid: int, grace_s: float = TERMINATE_GRACE_S) -> list[int]:
    """SIGTERM the process, its group and every descendant; SIGKILL what survives.

    Returns the pids that had to be killed hard. Descendants are listed before
    the parent dies, since orphans are re-parented and could not be found after.
    SIGINT and SIGTERM wait until the tree is gone.
    """
    with signals_deferred():
        return _kill_family(pid, grace_s)


def _kill_family(pid: int, grace_s: float) -> list[int]:
    try:
        root = psutil.Process(pid)
        family = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        family = []
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGTERM)
        os.killpg(pid, signal.SIGCONT)  # a stopped process acts on SIGTERM only once resumed
    hard = end_processes(family, grace_s)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)  # a member of the group not seen as a descendant
    return hard


# SGLang's main process reports its scheduler and detokenizer, stopped by this SIGTERM,
# as "Subprocess ... crashed with exit code -15"; the note says whose signal that was.
SHUTDOWN_NOTE = ("[harness] stopping the server: SIGTERM to its process group. "
                 "Lines below that report a subprocess exiting or crashing with exit code "
                 "-15 (SIGTERM) are this shutdown, not a failure")


# The server's process tree, watched while the main process lives (issue 30): SGLang's
# scheduler or detokenizer stopped (state T) leaves the main process serving nothing, and
# a dead child its parent has not reaped (a zombie) is a crash SGLang's own watchdog
# reports only seconds later. Both end the run at once, naming the process.
TREE_REFRESH_S = 1.0  # how often the list of descendants is re-read (/proc walk)
ZOMBIE_GRACE_S = 0.5  # a child seen dead this long unreaped (a parent reaps at once)


@dataclass
class _Member:
    process: psutil.Process
    label: str  # name, pid, command line: readable after the process is gone
    watched_for_death: bool = False  # alive at readiness: its death is the server's
    dead_since: float | None = None


class TreeWatch:
    """The descendants of a server's main process: `problem()` names one stopped (any
    time), or one alive when the server became ready that is now dead and left unreaped
    (a zombie: its parent, still running, has not noticed), else None. A helper that ran
    during startup may legitimately stay unreaped; a process reaped by its parent is the
    parent's to report (a subprocess the server ran and waited for ends that way)."""

    def __init__(self, root: int) -> None:
        self.root = root
        self.members: dict[int, _Member] = {}
        self._refreshed = -TREE_REFRESH_S

    def refresh(self, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        if now - self._refreshed < TREE_REFRESH_S:
            return
        self._refreshed = now
        try:
            children = psutil.Process(self.root).children(recursive=True)
        except psutil.Error:
            return
        for child in children:
            if child.pid not in self.members or \
                    not _same(self.members[child.pid].process, child):
                self.members[child.pid] = _Member(child, _label(child))

    def mark_ready(self) -> None:
        """The tree as it serves: from now on the death of any of these is an error."""
        self._refreshed = -TREE_REFRESH_S
        self.refresh()
        for member in self.members.values():
            with contextlib.suppress(psutil.Error):
                member.watched_for_death = member.process.status() != psutil.STATUS_ZOMBIE
                member.label = _label(member.process)  # its title by now (sglang::scheduler)

    def problem(self) -> str | None:
        now = time.monotonic()
        self.refresh(now)
        for pid, member in list(self.members.items()):
            try:
                status = member.process.status()
            except psutil.Error:  # gone, reaped by its parent: the parent's to report
                del self.members[pid]
                continue
            if status == psutil.STATUS_STOPPED:
                member.label = _label(member.process)  # a title set since it was first seen
                return (f"server process {member.label} is stopped (SIGSTOP or SIGTSTP): the "
                        "server cannot answer while it is")
            if status == psutil.STATUS_ZOMBIE and member.watched_for_death:
                member.dead_since = member.dead_since or now
                if now - member.dead_since >= ZOMBIE_GRACE_S:
                    return (f"server process {member.label} died (a zombie: exited, not "
                            "reaped by its parent, which still runs)")
        return None


def _same(known: psutil.Process, seen: psutil.Process) -> bool:
    """Not a recycled pid: the same process as the one first seen."""
    with contextlib.suppress(psutil.Error):
        return known.create_time() == seen.create_time()
    return False


def _label(process: psutil.Process) -> str:
    with contextlib.suppress(psutil.Error):
        name = process.name()
        command = " ".join(process.cmdline()).strip()[:120]  # a process title is padded
        return f"{name} (pid {process.pid}{': ' + command if command else ''})"
    return f"pid {process.pid}"


class RunningServer(Protocol):
    """What measuring asks of a started server: a process this host launched (`Server`),
    one node line per process on this host (`schedulers.local.LocalNodes`), a scheduler's
    job (`schedulers.slurm.SlurmJob`) or a server someone else runs (`attach.AttachedServer`)."""

    @property
    def base_url(self) -> str: ...

    def death(self) -> str | None:
        """None while it serves; else what ended it, said for a user."""
        ...


class Server:
    """A running engine server; use as a context manager so it always dies."""

    def __init__(self, spec: ServerSpec) -> None:
        self.spec = spec
        self.process: subprocess.Popen[bytes] | None = None
        self.ready_after_s: float | None = None
        self._log: IO[bytes] | None = None
        self._pump: _RedactingPump | None = None
        self.tree: TreeWatch | None = None

    @property
    def base_url(self) -> str:
        return self.spec.base_url

    def start(self) -> None:
        self.spec.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(self.spec.log_path, "ab")  # noqa: SIM115 - closed in stop()
        life = lifeline()
        life.arm()  # the watchdog first: the tree dies with the harness from its start
        env = {**os.environ, **self.spec.env, **life.mark_env, "PYTHONUNBUFFERED": "1"}
        try:
            self.process = subprocess.Popen(
                list(self.spec.command),
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=True,  # own group: killpg reaches every child
            )
        except OSError as error:
            self._close_log()
            raise EngineError(f"cannot start server `{self.spec.command[0]}`: {error}") from None
        life.started_tree(self.process.pid, self.spec.port,
                          [redact_text(word) for word in self.spec.command], self.spec.log_path)
        self.tree = TreeWatch(self.process.pid)
        if self.process.stdout is not None:
            self._pump = _RedactingPump(self.process.stdout, self._log)
            self._pump.start()

    def death(self) -> str | None:
        """None while the server process lives; else what happened, with its log's tail."""
        if self.process is None:
            return None
        code = self.process.poll()
        if code is not None:
            return (f"server exited with {describe_exit(code)} during the run; last lines of "
                    f"{self.spec.log_path}:\n{log_tail(self.spec.log_path)}")
        with contextlib.suppress(psutil.Error):
            if psutil.Process(self.process.pid).status() == psutil.STATUS_STOPPED:
                return "server process is stopped (SIGSTOP): it cannot answer"
        if self.tree is not None and (problem := self.tree.problem()) is not None:
            return f"{problem}; last lines of {self.spec.log_path}:\n" \
                   f"{log_tail(self.spec.log_path)}"
        return None

    def wait_ready(self) -> float:
        """Poll until every readiness endpoint answers 200; return seconds waited."""
        assert self.process is not None, "start() first"
        started = time.monotonic()
        deadline = started + self.spec.launch_timeout_s

        def check_alive(waiting_for: str) -> None:
            if (death := self.death()) is not None:
                raise EngineError(death.replace("during the run", "before it was ready"))
            if time.monotonic() > deadline:
                raise EngineError(
                    f"server not ready after {self.spec.launch_timeout_s:g} s "
                    f"(waiting for {waiting_for}); last lines of "
                    f"{self.spec.log_path}:\n{log_tail(self.spec.log_path)}"
                )

        poll_ready(self.spec.base_url, self.spec.ready_paths, check_alive,
                   self.spec.poll_interval_s)
        self.ready_after_s = time.monotonic() - started
        if self.tree is not None:
            self.tree.mark_ready()
        return self.ready_after_s

    def stop(self) -> None:
        if self.process is not None:
            running = self.process.poll() is None
            if running:  # what follows in the log is this shutdown, not a failure
                self._note(SHUTDOWN_NOTE)
            kill_tree(self.process.pid)  # whole, whatever signal arrives meanwhile
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=TERMINATE_GRACE_S)
            if running:
                code = self.process.poll()
                self._note(f"[harness] server stopped by the harness ("
                           f"{describe_exit(code) if code is not None else 'still exiting'})")
            lifeline().ended_tree(self.process.pid)
        if self._pump is not None:
            self._pump.join(timeout=TERMINATE_GRACE_S)  # the pipe closed with the tree
        self._close_log()

    def _note(self, line: str) -> None:
        """A line of the harness's own in the server log (the server writes there too)."""
        if self._log is not None:
            with contextlib.suppress(OSError, ValueError):
                self._log.write(f"{line}\n".encode())
                self._log.flush()

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> Server:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
