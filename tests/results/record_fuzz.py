"""What each protocol record's reader test asks of the door (`harness.results.readers`):
any bytes read as a record or refused as a BadRecord naming the file, a value put at a path
of a good record, and `harness plot` of a damaged record ending with exit 2, no traceback."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest
from hypothesis import strategies as st

from harness.cli import main
from harness.results.readers import BadRecord

RecordT = TypeVar("RecordT")



def json_trees(leaves: st.SearchStrategy[object], width: int, max_leaves: int
               ) -> st.SearchStrategy[object]:
    """JSON values: `leaves`, nested in lists and objects of up to `width` members."""
    return st.recursive(leaves, lambda inner: st.lists(inner, max_size=width)
                        | st.dictionaries(st.text(max_size=6), inner, max_size=width),
                        max_leaves=max_leaves)


JSON_DOCUMENTS = json_trees(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8), 4, 20,
).map(lambda value: json.dumps(value).encode())
DEEP_NESTING = b"[" * 5000 + b"]" * 5000


def any_bytes(*strategies: st.SearchStrategy[bytes]) -> st.SearchStrategy[bytes]:
    """Random bytes, random JSON, `strategies` (a good record damaged), deep nesting."""
    return st.one_of(st.binary(max_size=200), JSON_DOCUMENTS, *strategies,
                     st.just(DEEP_NESTING))


def cut_or_spliced(draw: st.DrawFn, text: bytes, damage: str, most_spliced: int) -> bytes:
    """`text` truncated at a drawn place (`damage` "truncate"), with up to `most_spliced`
    drawn bytes spliced in ("splice"), else as it is."""
    if damage == "truncate":
        return text[: draw(st.integers(0, len(text)))]
    if damage == "splice":
        at = draw(st.integers(0, len(text)))
        return text[:at] + draw(st.binary(min_size=1, max_size=most_spliced)) + text[at:]
    return text


def written_then_read(record: RecordT, folder: Path, results: Path,
                      write: Callable[[Path, RecordT, Path], Path],
                      read: Callable[[Path], RecordT]) -> RecordT:
    """`record` written into `folder` of the results tree `results`, then read back from it."""
    write(folder, record, results)
    return read(folder)


def replaced(document_json: str, path: tuple[str | int, ...], value: str) -> bytes:
    """The record `document_json` with the JSON `value` at `path` (`1e999`: infinity)."""
    document = json.loads(document_json)
    where = document
    for key in path[:-1]:
        where = where[key]
    where[path[-1]] = json.loads(value) if value != "1e999" else 1e999
    return json.dumps(document).encode()


def read_or_refused(file: Path, data: bytes, read: Callable[[Path], RecordT]
                    ) -> RecordT | None:
    """`data` written to `file` and read: the record, or None where it was refused as a
    BadRecord naming the file."""
    file.write_bytes(data)
    try:
        return read(file)
    except BadRecord as error:
        assert str(file) in error.message
        return None


def assert_plot_refuses(folder: Path, file_name: str, damage: str,
                        capsys: pytest.CaptureFixture[str]) -> None:
    """`harness plot FOLDER` of a record folder whose `file_name` holds `damage`: exit 2,
    naming the file, no traceback."""
    folder.mkdir(parents=True)
    (folder / file_name).write_text(damage)
    code = main(["plot", str(folder)])
    err = capsys.readouterr().err
    assert code == 2 and file_name in err and "Traceback" not in err
