"""Where the harness keeps files and how it writes them (standard library only): the
results folder and the cache, the shipped suites, atomic writes that never follow a link
out of their root. Below every stage (`suite`, `build`, `engines` and `results` use it);
imported at CLI start-up, so free of third-party imports. The layout inside a results
folder is `harness.results.layout`'s.
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from pathlib import Path

from harness.secrets import redact_text

SUITES_DIR = Path(__file__).resolve().parents[1] / "suites"  # the shipped suites
RESULTS_ENV = "HARNESS_RESULTS"
CACHE_ENV = "HARNESS_CACHE"
RESULTS_DIR = Path("results")


def default_results_dir() -> Path:
    """The results folder of every command: `$HARNESS_RESULTS` when set (and not empty),
    else `results` (relative to the cwd); `--results DIR` overrides it."""
    return Path(os.environ.get(RESULTS_ENV) or RESULTS_DIR)


def cache_root() -> Path:
    """The harness's own cache (engine environments, checkpoints, wheels, listings):
    `$HARNESS_CACHE`, else ~/.cache/spec-harness."""
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "spec-harness")


def inside(path: Path | str, root: Path | str) -> bool:
    """Whether `path`, its symbolic links resolved, is `root` or under it (resolved too):
    a results folder may itself be a link, but nothing below it may lead out."""
    real, top = os.path.realpath(path), os.path.realpath(root)
    return real == top or real.startswith(top.rstrip(os.sep) + os.sep)


def _special_kind(path: Path) -> str | None:
    """"device" or "fifo" for a path that is one (links followed), else None."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "device"
    return "fifo" if stat.S_ISFIFO(mode) else None


def _write_into(path: Path, text: str, kind: str) -> None:
    """Write `text` into a device or a FIFO. A FIFO is opened without waiting: with no
    reader the open fails (ENXIO) at once, where a blocking open would wait forever."""
    flags = os.O_WRONLY | (os.O_NONBLOCK if kind == "fifo" else 0)
    try:
        fd = os.open(path, flags)
    except OSError as error:
        if error.errno == errno.ENXIO:
            raise OSError(errno.ENXIO, "a FIFO with nothing reading it") from None
        raise
    if kind == "fifo":
        os.set_blocking(fd, True)  # a reader is there: a long text waits for it
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)


class OutsideResults(OSError):
    """A write that would follow a symbolic link out of the results folder."""


def check_inside(path: Path | str, root: Path | str) -> None:
    if not inside(path, root):
        raise OutsideResults(f"{path} leads out of the results folder {root} (a symbolic "
                             "link): nothing is written there")


def atomic_write_text(path: Path, text: str, root: Path | str | None = None) -> None:
    """Write via a temp file and rename, so readers never see half a file; secrets redacted
    (harness.secrets). With `root` (the results folder), refuse (OutsideResults) when the
    file's folder leads out of it."""

    text = redact_text(text)  # every secret, in every file the harness writes
    kind = _special_kind(path)
    # `--out /dev/null`: a rename would replace the device itself (as root, /dev/null became
    # a regular file), so a device is written into, wherever it stands. A FIFO the user
    # named is written into when something reads it; inside the results folder a FIFO is
    # no file of the harness's and is replaced, as a damaged file would be.
    if kind == "device" or (kind == "fifo" and root is None):
        _write_into(path, text, kind)
        return
    if root is not None:  # before mkdir too: no folder is made through a link out of root
        check_inside(path.parent, root)
    path.parent.mkdir(parents=True, exist_ok=True)
    if root is not None:
        check_inside(path.parent, root)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; records are shared data
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
