"""Every corpus draft names its source in tests/audit/corpus/SOURCES.md, and every published
file said to be copied byte for byte is: its size and sha256 as the source states them."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

CORPUS = Path(__file__).with_name("corpus")
ROW = re.compile(r"^\| (?P<folder>[a-z0-9][a-z0-9.\-]*) \| (?P<source>.*)$", re.MULTILINE)
HASHED = re.compile(r"(?P<size>\d+) bytes, sha256 (?P<sha>[0-9a-f]{64})")


def _rows() -> dict[str, str]:
    text = (CORPUS / "SOURCES.md").read_text(encoding="utf-8")
    return {m["folder"]: m["source"] for m in ROW.finditer(text) if m["folder"] != "folder"}


def test_every_draft_of_the_corpus_names_its_source() -> None:
    drafts = {p.name for p in CORPUS.iterdir() if (p / "config.json").is_file()}
    rows = _rows()
    assert drafts == set(rows), (drafts ^ set(rows))


def test_every_published_file_is_the_published_bytes() -> None:
    hashed = {folder: HASHED.search(source) for folder, source in _rows().items()}
    hashed = {folder: match for folder, match in hashed.items() if match}
    assert {"zlab-dflash2-muse-glimmer", "zlab-qwen3.8-27b-dflash2",
            "xiaomimimo-mimo-v2.5-pro-fp4-dflash"} <= set(hashed)
    for folder, match in hashed.items():
        data = (CORPUS / folder / "config.json").read_bytes()
        assert len(data) == int(match["size"]), folder
        assert hashlib.sha256(data).hexdigest() == match["sha"], folder
