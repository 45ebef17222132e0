"""Results shared by the xdist workers of one test session.

A session-scoped fixture runs once per xdist worker; where it is expensive (a harness run,
every SGLang release's audit table) the first worker makes it under a file lock in a folder
all workers of this session share, and the others read it (pytest-xdist's recipe for a
session fixture that runs once). The folder belongs to this session only: without xdist it
is the session's own temporary folder, never one shared with other sessions.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


def session_shared_dir(factory: pytest.TempPathFactory, name: str) -> Path:
    """A folder named `name` shared by every xdist worker of this session (and only them)."""
    base = factory.getbasetemp()
    # Under xdist each worker's basetemp is <session>/popen-gwN: the parent is the session's.
    folder = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / name
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def bare_environment(**variables: str) -> dict[str, str]:
    """A subprocess environment with nothing of this one's but the system PATH and where the
    data lies: `HARNESS_DATA_DIR`, when set, names the data in a clone with no ../shared
    beside it, and a test that drops it fails there for a reason that is not its own."""
    env = {"PATH": "/usr/bin:/bin"}
    if "HARNESS_DATA_DIR" in os.environ:
        env["HARNESS_DATA_DIR"] = os.environ["HARNESS_DATA_DIR"]
    return {**env, **variables}


def libraries_loaded_by(module: str, libraries: set[str]) -> list[str]:
    """Which of `libraries` (top-level names) importing `module` loads, in a fresh
    interpreter: a light module's promise, checked where it stands."""
    probe = (f"import sys, {module}; print(','.join(sorted({{m.split('.')[0] for m in "
             f"sys.modules}} & set({sorted(libraries)!r}))))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True).stdout
    return [name for name in out.strip().split(",") if name]


def reference_workers(root: int) -> list:  # -> list[psutil.Process]
    """The decoding workers of the reference engine servers in the process tree under pid
    `root` (or the server's own pid): the children of a `python -m reference_engine`
    process other than multiprocessing's resource tracker, whichever way they started
    (forked on the CPU, spawned on CUDA: `reference_engine.loading.start_method`)."""
    import psutil

    tree = psutil.Process(root)
    workers = []
    for process in [tree, *tree.children(recursive=True)]:
        try:
            if "reference_engine" not in process.cmdline():
                continue
            workers += [child for child in process.children()
                        if "resource_tracker" not in " ".join(child.cmdline())]
        except psutil.NoSuchProcess:
            continue
    return workers
