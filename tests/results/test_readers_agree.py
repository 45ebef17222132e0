"""Every reader of a run record answers as the door does (`harness.results.readers`):
`harness plot` of any kind draws only a record the door reads, and names the file of one
it refuses (exit 2); the loader lists a run exactly when the door reads it."""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from io import StringIO
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.cli import main
from harness.results.layout import REQUESTS_FILE, RUN_FILE
from harness.results.readers import BadRecord, read_run
from harness.results.store import load_runs
from tests.results.records import make_history
from tests.results.test_loader_fuzz import mutated_records

SUITE = "tiny_dflash_cpu"
KINDS = ("run", "histogram", "history")
FUZZ = settings(max_examples=25, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("agree") / "results"
    make_history(root, nights=2)
    return root


@contextmanager
def with_mutant(base: Path, text: bytes) -> Iterator[Path]:
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder) / "results"
        shutil.copytree(base, root)
        mutant = root / "runs" / SUITE / "20990101T000000Z-mutant"
        mutant.mkdir()
        (mutant / RUN_FILE).write_bytes(text)
        shutil.copy(next((base / "runs" / SUITE).glob(f"*/{REQUESTS_FILE}")),
                    mutant / REQUESTS_FILE)
        yield mutant


def plot(run_dir: Path, kind: str) -> tuple[int, str]:
    out, err = StringIO(), StringIO()
    logging.disable(logging.WARNING)
    try:
        with redirect_stdout(out), redirect_stderr(err):
            code = main(["plot", str(run_dir), "--kind", kind, "--out",
                         str(run_dir / f"{kind}.png")])
    finally:
        logging.disable(logging.NOTSET)
    return code, err.getvalue()


def test_plot_refuses_a_record_the_door_refuses(base: Path) -> None:
    template = json.loads(next((base / "runs" / SUITE).glob(f"*/{RUN_FILE}")).read_text())
    del template["provenance"]["python"]  # the model requires it: the door refuses
    with with_mutant(base, json.dumps(template).encode()) as mutant:
        with pytest.raises(BadRecord, match=r"provenance\.python"):
            read_run(mutant)
        for kind in KINDS:
            code, err = plot(mutant, kind)
            assert code == 2 and str(mutant / RUN_FILE) in err, (kind, err)
            assert "provenance.python" in err


@FUZZ
@given(data=st.data())
def test_plot_and_the_loader_agree_with_the_door(base: Path, data: st.DataObject) -> None:
    """Any mutation of a record: the loader lists the run exactly when the door reads it,
    and `plot RUN --kind history` (which names a suite through the record) ends 0 only on
    a record the door reads."""
    template = json.loads(next((base / "runs" / SUITE).glob(f"*/{RUN_FILE}")).read_text())
    with with_mutant(base, data.draw(mutated_records(template))) as mutant:
        try:
            read_run(mutant)
            readable = True
        except BadRecord:
            readable = False
        listed = str(mutant) in set(load_runs(mutant.parents[2])["path"])
        assert listed == readable
        code, _ = plot(mutant, "history")
        assert code == (0 if readable else 2)
