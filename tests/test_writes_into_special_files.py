"""A file the harness writes where a device or FIFO already stands (`harness export --out
/dev/null`, `--out` a named pipe) is written into, never replaced: a write-and-rename over
it would put a regular file in the device's place (as root, /dev/null itself)."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

from harness.files import atomic_write_text


def _read_fifo(fifo: Path, into: list[str]) -> threading.Thread:
    def read() -> None:
        with open(fifo, encoding="utf-8") as handle:
            into.append(handle.read())
    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    return reader


def test_a_fifo_is_written_into_and_stays_a_fifo(tmp_path: Path) -> None:
    fifo = tmp_path / "out.jsonl"
    os.mkfifo(fifo)
    got: list[str] = []
    reader = _read_fifo(fifo, got)
    atomic_write_text(fifo, '{"a": 1}\n')
    reader.join(timeout=10)
    assert got == ['{"a": 1}\n']
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert [p.name for p in tmp_path.iterdir()] == ["out.jsonl"]  # no temp file left


def test_the_null_device_stays_a_device() -> None:
    atomic_write_text(Path(os.devnull), "nothing\n")
    assert stat.S_ISCHR(os.stat(os.devnull).st_mode)


def test_a_regular_file_is_still_replaced_whole(tmp_path: Path) -> None:
    target = tmp_path / "out.json"
    target.write_text("old and longer\n", encoding="utf-8")
    atomic_write_text(target, "new\n")
    assert target.read_text(encoding="utf-8") == "new\n"
    assert stat.S_ISREG(os.stat(target).st_mode)
