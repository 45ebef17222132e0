"""What the benchmarks share: timing a command, and a folder kept or scratch."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]


def time_command(argv: list[str], repeat: int, env: dict[str, str],
                 ok: tuple[int, ...] = (0,)) -> list[float]:
    """Wall seconds of each of `repeat` runs of `argv` from the repository root; SystemExit
    with its stderr where it exits with a code not in `ok`."""
    seconds = []
    for _ in range(repeat):
        start = time.perf_counter()
        done = subprocess.run(argv, capture_output=True, text=True, cwd=REPO_ROOT, env=env,
                              check=False)  # fmt: skip
        seconds.append(time.perf_counter() - start)
        if done.returncode not in ok:
            raise SystemExit(f"{' '.join(argv)} exited {done.returncode}:\n{done.stderr}")
    return seconds


@contextmanager
def kept_or_scratch(folder: Path | None, prefix: str) -> Iterator[Path]:
    """`folder` (`--dir`: kept, reused next time), else a scratch folder removed after."""
    root = folder or Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield root
    finally:
        if folder is None:
            shutil.rmtree(root, ignore_errors=True)
