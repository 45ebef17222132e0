"""Engine environments under the cache: made once, under a lock, and never half-made.

A folder is complete when its `.harness-complete` marker exists; anything else found
under the lock is the remains of an interrupted build and is removed. A build's
scratch files live in `<env>.building-<pid>` and are removed whatever happens.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from harness.builds import gitrepo
from harness.builds.common import (
    VENV_TIMEOUT_S,
    bounded_lock,
    install_timeout,
    run_command,
    staging_dir,
    sweep_stale,
)
from harness.builds.probe import BUILD_NOTE

COMPLETE = ".harness-complete"
# (pip command, the new interpreter, install_args' result, scratch) -> what was installed
Installer = Callable[[list[str], Path, list[str], Path], dict[str, Any]]


def is_complete(env_dir: Path) -> bool:
    return (env_dir / COMPLETE).is_file() and (env_dir / "bin" / "python").exists()


def ensure_env(
    env_dir: Path, what: str, install_args: Callable[[Path], Sequence[str]],
    note: dict[str, Any], pip_args: Sequence[str] = (), *,
    after: Callable[[str], None] | None = None,
    installer: Installer | None = None,
) -> str:
    """The interpreter of `env_dir`, made first if needed: a virtual environment into
    which `pip install <pip_args> <install_args(scratch)>` is run. `install_args` may
    write files into `scratch` (a snapshot to install from); `note` is written into the
    environment as harness-build.json, where the probe reads it back. `installer`, when
    given, replaces that one `pip install` (a recipe of several steps, such as SGLang's
    CPU build); what it returns is added to the note. `after(python)` runs once the install
    is done, before the environment is marked complete."""
    python = env_dir / "bin" / "python"
    sweep_stale(env_dir.parent)
    with bounded_lock(env_dir.with_name(env_dir.name + ".lock"), what):
        if is_complete(env_dir):
            return str(python)
        if env_dir.exists():
            shutil.rmtree(env_dir)  # a half-made environment from an interrupted build
        scratch = staging_dir(env_dir)
        try:
            args = list(install_args(scratch))
            if installer is None:
                _make_env(env_dir, python, [*pip_args, *args], what)
            else:
                pip = _make_venv(env_dir, python)
                note = {**note, "installed": installer(pip, python, args, scratch)}
            if after is not None:
                after(str(python))
            (env_dir / BUILD_NOTE).write_text(json.dumps(note, indent=1, default=str))
            (env_dir / COMPLETE).write_text(json.dumps(args))
        except BaseException:
            shutil.rmtree(env_dir, ignore_errors=True)
            raise
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    return str(python)


def _make_venv(env_dir: Path, python: Path) -> list[str]:
    """A new virtual environment; the pip command that installs into it."""
    # With pip here, this interpreter's pip installs into the new environment
    # (`pip --python`), which saves bootstrapping pip into every environment.
    with_pip = importlib.util.find_spec("pip") is None
    run_command([sys.executable, "-m", "venv", *([] if with_pip else ["--without-pip"]),
                 str(env_dir)], f"creating {env_dir}", timeout_s=VENV_TIMEOUT_S)
    return ([str(python), "-m", "pip"] if with_pip
            else [sys.executable, "-m", "pip", "--python", str(python)])


def _make_env(env_dir: Path, python: Path, args: list[str], what: str) -> None:
    pip = _make_venv(env_dir, python)
    run_command([*pip, "install", "--quiet", "--no-input", "--disable-pip-version-check", *args],
                f"pip install ({what}) into {env_dir}", timeout_s=install_timeout(),
                env={**gitrepo.git_env(), "PIP_NO_INPUT": "1"},
                timeout_hint="HARNESS_INSTALL_TIMEOUT_S sets the limit")


def pip_command(python: str) -> list[str]:
    """`pip` acting on the environment of `python` (as `_make_env` installs into it)."""
    if importlib.util.find_spec("pip") is None:
        return [python, "-m", "pip"]
    return [sys.executable, "-m", "pip", "--python", python]
