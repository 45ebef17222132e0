"""Find or build the tiny reference checkpoints, without importing torch here.

Why a subprocess: the harness process stays torch-free (design.md); the build runs in the
engine environment's Python (`python -m harness.engines.reference.train`). Why a file
lock: pytest-xdist workers or parallel suites may all ask for the checkpoints at once;
exactly one builds, the others wait and reuse. The build writes into a temporary folder
and renames it into place, so a crash never leaves a half-built cache entry.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from filelock import FileLock

import harness
from harness.build import cache_root as harness_cache_root
from harness.engines.reference.recipe import DEFAULT_RECIPE, Recipe
from harness.errors import EngineError

BUILD_TIMEOUT_S = 1800


def checkpoint_dir(cache_root: Path, recipe: Recipe = DEFAULT_RECIPE) -> Path:
    """`<cache_root>/reference/<recipe hash>/`: a changed recipe never reuses a stale build."""
    return cache_root / "reference" / recipe.digest()


def is_complete(folder: Path) -> bool:
    """recipe.json is written last, so its presence means the build finished."""
    return (folder / "recipe.json").is_file() and all(
        (folder / role / name).is_file()
        for role in ("target", "draft")
        for name in ("config.json", "model.safetensors")
    )


def build(python: str, out: Path, *, force: bool = False) -> Path:
    """Build the checkpoints into `out` (under a lock) unless already there; return `out`."""
    out = out.expanduser().resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(out) + ".lock"):
        if is_complete(out) and not force:
            return out
        staging = out.with_name(f"{out.name}.building-{os.getpid()}")
        shutil.rmtree(staging, ignore_errors=True)
        _run_build(python, staging)
        if out.exists():
            shutil.rmtree(out)
        staging.rename(out)
    return out


def ensure_checkpoints(python: str = sys.executable,
                       cache_root: Path | None = None) -> tuple[Path, Path]:
    """(target dir, draft dir) of the default recipe, building them on first use."""
    folder = build(python, checkpoint_dir(cache_root or harness_cache_root()))
    return folder / "target", folder / "draft"


def _run_build(python: str, staging: Path) -> None:
    # The engine env may not have this checkout installed: put it on the child's path.
    source_root = str(Path(harness.__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        filter(None, [source_root, os.environ.get("PYTHONPATH")]))}
    command = [python, "-m", "harness.engines.reference.train", "--out", str(staging)]
    try:
        completed = subprocess.run(command, env=env, timeout=BUILD_TIMEOUT_S, check=False)
    except FileNotFoundError as error:
        raise EngineError(f"engine python {python!r} not found: {error}") from error
    except subprocess.TimeoutExpired as error:
        shutil.rmtree(staging, ignore_errors=True)
        raise EngineError(f"reference checkpoint build exceeded {BUILD_TIMEOUT_S} s") from error
    if completed.returncode != 0 or not is_complete(staging):
        shutil.rmtree(staging, ignore_errors=True)
        raise EngineError(
            f"reference checkpoint build failed (exit {completed.returncode}): "
            f"{' '.join(command)}; its log is above. Does {python} have the `reference` "
            "extra installed (pip install -e '.[reference]')?")
