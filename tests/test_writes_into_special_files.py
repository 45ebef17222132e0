"""A file the harness writes where a device or FIFO already stands (`harness export --out
/dev/null`, `--out` a named pipe) is written into, never replaced: a write-and-rename over
it would put a regular file in the device's place (as root, /dev/null itself)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from harness.files import atomic_write_text


def test_a_fifo_with_a_reader_is_written_into_and_stays_a_fifo(tmp_path: Path) -> None:
    fifo = tmp_path / "out.jsonl"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # the reader is there first
    try:
        atomic_write_text(fifo, '{"a": 1}\n')
        assert os.read(reader, 1024) == b'{"a": 1}\n'
    finally:
        os.close(reader)
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert [p.name for p in tmp_path.iterdir()] == ["out.jsonl"]  # no temp file left


def test_a_fifo_nothing_reads_is_refused_at_once(tmp_path: Path) -> None:
    """No reader: the write fails (ENXIO) instead of waiting forever, the FIFO kept."""
    fifo = tmp_path / "out.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(OSError, match="nothing reading it"):
        atomic_write_text(fifo, "text\n")
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_a_fifo_inside_the_results_folder_is_replaced(tmp_path: Path) -> None:
    """The harness's own file (an index, a record) where a FIFO stands: replaced, as a
    damaged file is, never waited on."""
    fifo = tmp_path / ".index.jsonl"
    os.mkfifo(fifo)
    atomic_write_text(fifo, "row\n", root=tmp_path)
    assert fifo.read_text(encoding="utf-8") == "row\n"


def test_the_null_device_stays_a_device() -> None:
    atomic_write_text(Path(os.devnull), "nothing\n")
    assert stat.S_ISCHR(os.stat(os.devnull).st_mode)


def test_a_regular_file_is_still_replaced_whole(tmp_path: Path) -> None:
    target = tmp_path / "out.json"
    target.write_text("old and longer\n", encoding="utf-8")
    atomic_write_text(target, "new\n")
    assert target.read_text(encoding="utf-8") == "new\n"
    assert stat.S_ISREG(os.stat(target).st_mode)
