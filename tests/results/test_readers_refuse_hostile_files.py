"""One door for stored results (issue 29), each case as the issue found it on 48b3f00: every
reader of a run record, request rows, a calibration or the index reads through the checked
door (regular files, bounded size and entry counts, strict types, possible figures); the
index is checked like a record and never written through a link out of the results."""

from __future__ import annotations

import json
import os
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from harness.analysis.paired_report import latest_paired
from harness.cli import main
from harness.errors import BadInput
from harness.results import readers, store
from harness.results.layout import INDEX_FILE, REQUESTS_FILE, RUN_FILE, SNAPSHOT_FILE
from harness.results.readers import BadRecord, read_calibration, read_requests, read_run
from tests.results.records import make_run, paired_block

SUITE = "tiny_dflash_cpu"


def _edit(run_dir: Path, change: Any) -> None:
    data = json.loads((run_dir / RUN_FILE).read_text())
    change(data)
    (run_dir / RUN_FILE).write_text(json.dumps(data))


def _paired(data: dict[str, Any]) -> None:
    data["paired"] = paired_block(
        data["measurement"]["accept_length"],
        {"run_id": "ref", "spec": "reference", "reused": True, "path": "x"},
        alpha=0.05, tolerance="2.0% of A (per_request)", margin_sd=0.3)


# ------------------------------------------------------------ hostile files, every reader

HOSTILE = ["fifo", "dev_zero", "too_large", "deep", "empty"]


def _plant(file: Path, kind: str) -> None:
    file.unlink(missing_ok=True)
    if kind == "fifo":
        os.mkfifo(file)  # opening it for reading without O_NONBLOCK waits forever
    elif kind == "dev_zero":
        file.symlink_to("/dev/zero")  # read to the end: grows without bound
    elif kind == "too_large":
        with open(file, "wb") as handle:
            handle.truncate(65 * 2**20)  # sparse: costs no disk
    elif kind == "deep":
        file.write_text("[" * 10**6)
    else:
        file.write_text("")


def _readers(root: Path, run_dir: Path) -> dict[str, Any]:
    from harness.commands.power import recorded_paired_spread
    from harness.protocols.calibrate import find_calibration
    from harness.protocols.pairing import reusable

    return {
        "paired": lambda: latest_paired(root, [SUITE]),
        "power": lambda: recorded_paired_spread(root, SUITE, 5),
        "reuse": lambda: reusable(root, SUITE, {"suite_sha256": "0" * 64}),
        "calibration": lambda: find_calibration(root, SUITE),
        "requests": lambda: read_requests(run_dir),
        "loader": lambda: store.load_runs(root),
    }


@pytest.mark.parametrize("kind", HOSTILE)
def test_every_reader_survives_hostile_files(tmp_path: Path, kind: str) -> None:
    """A FIFO hung `harness paired`, /dev/zero grew it to 16.9 GB, deep nesting gave a
    traceback: now each reader returns at once with nothing read from the file."""
    root = tmp_path / "results"
    run_dir = make_run(root)
    _edit(run_dir, _paired)
    calibration = root / "calibrations" / SUITE / "20260101T000000Z-c1.json"
    calibration.parent.mkdir(parents=True)
    for file in (run_dir / RUN_FILE, run_dir / REQUESTS_FILE, calibration):
        _plant(file, kind)
    for name, read in _readers(root, run_dir).items():
        start = time.monotonic()
        found = read()
        assert time.monotonic() - start < 20, name
        if name == "paired":  # the latest run has no readable record: an errored night
            assert found[SUITE].record is None and found[SUITE].path == run_dir
        elif name in ("power", "reuse", "calibration"):
            assert found is None, name
        elif name == "requests":
            assert found == []
        else:
            assert found.empty
    with pytest.raises(BadRecord):
        read_run(run_dir)
    if kind == "empty":  # no rows is what an empty file holds (a reference counts them)
        assert read_requests(run_dir, strict=True) == []
    else:
        with pytest.raises(BadRecord, match=REQUESTS_FILE):
            read_requests(run_dir, strict=True)


def test_harness_paired_on_a_fifo_ends_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "results"
    run_dir = make_run(root)
    _plant(run_dir / RUN_FILE, "fifo")
    assert main(["paired", SUITE, "--results", str(root)]) == 3  # no record: no pass
    captured = capsys.readouterr()
    assert "not a regular file" in captured.out and "Traceback" not in captured.err


# ------------------------------------------------------------ figures and their types

STRING_FIGURES = ["-3", "NaN", "inf", "3.0"]


@pytest.mark.parametrize("value", STRING_FIGURES)
def test_a_figure_given_as_a_string_is_refused(tmp_path: Path, value: str,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """`"accept_length": "-3"` was coerced: `plot RUN` drew -3.000 marked PASS."""
    root = tmp_path / "results"
    run_dir = make_run(root)
    _edit(run_dir, lambda d: d["measurement"].update(accept_length=value))
    assert main(["plot", str(run_dir)]) == 2
    err = capsys.readouterr().err
    assert "measurement.accept_length" in err and "Traceback" not in err
    frame = store.load_runs(root)
    assert frame.empty and "measurement.accept_length" in frame.attrs["skipped"][0]
    with pytest.raises(BadRecord, match=r"measurement\.accept_length"):
        read_run(run_dir)


IMPOSSIBLE: list[tuple[Any, str]] = [
    (lambda d: d["measurement"].update(categories={"a": {
        "n_prompts": 3, "n_requests": 3, "accept_length": 2.5, "accuracy": 7}}),
     "measurement.categories.a.accuracy"),
    (lambda d: d["measurement"].update(categories={"a": {
        "n_prompts": -5, "n_requests": 3, "accept_length": 2.5}}),
     "measurement.categories.a.n_prompts"),
    (lambda d: d["measurement"].update(n_prompts=-5), "measurement.n_prompts"),
    (lambda d: d["measurement"].update(per_position_acceptance=[0.5, 1.5]),
     "measurement.per_position_acceptance[1]"),
    (lambda d: d["measurement"].update(per_position_acceptance=[0.5] * 10**5),
     "measurement.per_position_acceptance"),
    (lambda d: d["measurement"].update(categories={
        f"c{i}": {"n_prompts": 1, "n_requests": 1} for i in range(20_000)}),
     "measurement.categories"),
    (lambda d: d["measurement"].update(accept_length_ci=[3.5, 3.9]),
     "measurement.accept_length_ci"),
    (lambda d: d["suite"]["document"]["baselines"][0].update(accept_length=1e308),
     "suite.document.baselines[0].accept_length"),
    (lambda d: d["suite"]["document"]["baselines"][0].update(accept_length=-1e308),
     "suite.document.baselines[0].accept_length"),
    (lambda d: d["suite"]["document"]["floors"].update(accept_length="2"),
     "suite.document.floors.accept_length"),
    (lambda d: d.update(paired={"status": "pass", "result": {"b": "x"}}), "paired"),
]


@pytest.mark.parametrize(("change", "field"), IMPOSSIBLE)
def test_impossible_figures_are_refused_by_every_reader(
    tmp_path: Path, change: Any, field: str, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "results"
    run_dir = make_run(root)
    _edit(run_dir, change)
    start = time.monotonic()
    frame = store.load_runs(root)
    assert frame.empty and field in frame.attrs["skipped"][0]
    with pytest.raises(BadInput, match=field.replace("[", r"\[")):
        read_run(run_dir)
    for args in (["plot", str(run_dir)], ["plot", SUITE, "--results", str(root)],
                 ["paired", SUITE, "--results", str(root)]):
        assert main(args) in (0, 1, 2, 3)
    assert time.monotonic() - start < 60  # 10^5 positions hung plot for 400 s
    assert "Traceback" not in capsys.readouterr().err


def test_a_forged_paired_section_crashes_no_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The forged latest record is refused by the door: the night errored (named), never
    the older pass shown in its place (issue 37)."""
    root = tmp_path / "results"
    good = make_run(root, seed=1)
    _edit(good, _paired)
    found = latest_paired(root, [SUITE])[SUITE]
    assert found is not None and found.record is not None and found.path == good
    forged = make_run(root, seed=2, started_at=datetime(2030, 1, 1, tzinfo=UTC))  # the latest
    _edit(forged, lambda d: (_paired(d), d["paired"]["result"].update(relative_change=None)))
    found = latest_paired(root, [SUITE])[SUITE]
    assert found is not None and found.record is None and found.path == forged
    assert main(["paired", SUITE, "--results", str(root), "--markdown"]) == 3
    captured = capsys.readouterr()
    assert "paired.result.relative_change" in captured.out and str(forged) in captured.out
    assert "Traceback" not in captured.err


# ------------------------------------------------------------ request rows


def _block(size: int) -> Any:
    return lambda d: d["suite"]["document"].update(speculative={"num_draft_tokens": size})


def test_request_rows_are_checked_against_the_block_and_their_counts(tmp_path: Path) -> None:
    """`correct_drafts` 1000 on a block of 8 gave 120.9 in `compare`."""
    root = tmp_path / "results"
    run_dir = make_run(root, n=6)
    _edit(run_dir, _block(8))
    rows = [json.loads(line) for line in (run_dir / REQUESTS_FILE).read_text().splitlines()]
    rows[0].update(correct_drafts=1000, verify_steps=10, completion_tokens=30,
                   spec_accept_length=3.0)
    rows[1].update(completion_tokens=5, verify_steps=10, spec_accept_length=0.5)
    rows[2].update(spec_accept_length=rows[2]["spec_accept_length"] + 1)
    rows[3].update(completion_tokens=1000, verify_steps=10, spec_accept_length=100.0)
    (run_dir / REQUESTS_FILE).write_text("".join(json.dumps(r) + "\n" for r in rows))
    kept = read_requests(run_dir)
    assert [r.index for r in kept] == [4, 5]
    frame = store.load_requests(run_dir)
    reasons = " ".join(frame.attrs["skipped"])
    for why in ("correct_drafts: 1000 is more than verify_steps 10 can accept (a DFLASH "
                "verify step of block size 8 makes at most 8 tokens: at most 7 drafts a step)",
                "completion_tokens: 5 is below verify_steps", "spec_accept_length",
                "completion_tokens: 1000 is more than"):
        assert why in reasons


def test_bad_lines_are_summed_up_not_printed_one_by_one(tmp_path: Path) -> None:
    """20M empty lines printed 2.6M skip lines: now at most 20 and one more, and a file
    of more lines than a run can have is one line."""
    root = tmp_path / "results"
    run_dir = make_run(root, n=4)
    with open(run_dir / REQUESTS_FILE, "a") as handle:
        handle.write("x\n" * 5000)
    frame = store.load_requests(run_dir)
    assert len(frame) == 4
    assert len(frame.attrs["skipped"]) == readers.MAX_LINE_REPORTS + 1
    assert "4980 more bad lines" in frame.attrs["skipped"][-1]
    (run_dir / REQUESTS_FILE).write_text("\n" * (readers.MAX_REQUEST_LINES + 1))
    frame = store.load_requests(run_dir)
    assert frame.empty and len(frame.attrs["skipped"]) == 1


# ------------------------------------------------------------ calibration records


def _calibration(root: Path, **changes: Any) -> Path:
    data = {"kind": "calibration", "calibration_id": "c1", "suite": SUITE, "n_runs": 3,
            "metric": "server_avg", "build": {"spec": "reference"},
            "host": {"gpus": [], "tp_size": 1, "driver": None},
            "series": {SUITE: {"mean": 3.8, "min": 3.7, "max": 3.9, "run_sd": 0.05,
                               "within_se": 0.1, "paired_sd": 0.2, "suggested_floor": 3.6,
                               "suggested_relative_drop": 0.02, "floor_rule": "r",
                               "tolerance_rule": "t"}}}
    for key, value in changes.items():
        where, _, leaf = key.rpartition("__")
        target = data
        for part in where.split("__") if where else []:
            target = target[part]
        target[leaf] = value
    path = root / "calibrations" / SUITE / "20260101T000000Z-c1.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize("changes", [
    {"n_runs": "3"}, {"series__tiny_dflash_cpu__mean": "NaN"},
    {"series__tiny_dflash_cpu__mean": -5.0}, {"series__tiny_dflash_cpu__run_sd": 1e308},
    {"host__gpus": "H100"}, {"series": [1, 2]}, {"host__tp_size": 0},
])
def test_a_calibration_is_checked_before_show_prints_it(
    tmp_path: Path, changes: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    from harness.protocols.calibrate import find_calibration

    root = tmp_path / "results"
    good = _calibration(root)
    assert read_calibration(good)["calibration_id"] == "c1"
    bad = _calibration(root, **changes)
    with pytest.raises(BadRecord):
        read_calibration(bad)
    assert find_calibration(root, SUITE) is None
    assert "Traceback" not in capsys.readouterr().err


# ------------------------------------------------------------ the index


def _index_line(root: Path) -> tuple[Path, list[Any]]:
    log = root / "runs" / SUITE / INDEX_FILE
    return log, json.loads(log.read_text().splitlines()[-1])


def test_a_forged_index_line_is_not_believed(tmp_path: Path) -> None:
    """A forged `.index.jsonl` line printed -7.5, pass: now the row is dropped, the run
    re-read from its folder, and the index says so."""
    from harness.results.index import INDEXED

    root = tmp_path / "results"
    make_run(root, accept_length=2.5)
    log, line = _index_line(root)
    true = line[4 + INDEXED.index("accept_length")]
    line[4 + INDEXED.index("accept_length")] = -7.5
    line[4 + INDEXED.index("verdict")] = "pass"
    log.write_text(json.dumps(line) + "\n")
    frame = store.load_runs(root)
    assert frame["accept_length"].tolist() == [true]
    assert any("accept_length" in s and INDEX_FILE in s for s in frame.attrs["skipped"])


@pytest.mark.parametrize(("column", "value"), [
    ("accept_length", "3.5"), ("started_at", "not a time"), ("verdict", "PASS!"),
    ("accuracy", 7.0), ("completion_tokens", -4), ("ci_low", 99.0), ("suite", None),
    ("label", "x" * 5000),
])
def test_a_forged_snapshot_row_is_not_believed(tmp_path: Path, column: str, value: Any) -> None:
    from harness.results.index import INDEXED

    root = tmp_path / "results"
    for seed in range(3):
        make_run(root, seed=seed)
    store.load_runs(root)  # compacts nothing yet: force a snapshot
    from harness.results.index import scan_suite

    scan_suite(root / "runs" / SUITE, lambda path, reason: None, compact=True)
    snapshot = root / "runs" / SUITE / SNAPSHOT_FILE
    data = json.loads(snapshot.read_text())
    at = INDEXED.index(column)
    values = [None] * 3 if column == "suite" else None
    table = data["table"][at]
    if isinstance(table, dict) and "runs" in table:
        values = [v for v, count in table["runs"] for _ in range(count)]
    elif isinstance(table, list):
        values = list(table)
    elif values is None:
        import array
        import base64

        values = array.array("d", base64.b64decode(table["d"])).tolist()
    values[1] = value
    data["table"][at] = values
    snapshot.write_text(json.dumps(data))
    frame = store.load_runs(root)
    assert len(frame) == 3
    assert value not in frame[column].tolist()
    assert any(SNAPSHOT_FILE in s and column in s for s in frame.attrs["skipped"])


def test_the_index_is_bounded_in_size(tmp_path: Path) -> None:
    """An index may not be 1 GiB (3.1 GB resident in `trend`): above the bound it is
    rebuilt from the run folders."""
    from harness.results.index import INDEX_LIMIT

    assert INDEX_LIMIT <= 64 * 2**20
    root = tmp_path / "results"
    make_run(root)
    snapshot = root / "runs" / SUITE / SNAPSHOT_FILE
    with open(snapshot, "wb") as handle:
        handle.truncate(INDEX_LIMIT + 1)
    frame = store.load_runs(root)
    assert len(frame) == 1
    assert snapshot.stat().st_size < 2**20  # rewritten from the run folders


def test_no_write_follows_a_link_out_of_the_results(tmp_path: Path) -> None:
    """A suite folder linked to /etc got `/etc/.index-snapshot.json`."""
    from harness.files import OutsideResults

    outside = tmp_path / "etc"
    elsewhere = tmp_path / "elsewhere"
    make_run(elsewhere)
    (elsewhere / "runs" / SUITE).rename(outside)
    root = tmp_path / "results"
    (root / "runs").mkdir(parents=True)
    (root / "runs" / SUITE).symlink_to(outside)
    for name in (INDEX_FILE, SNAPSHOT_FILE):
        (outside / name).unlink(missing_ok=True)
    frame = store.load_runs(root)
    assert len(frame) == 1  # read, not written
    assert not (outside / SNAPSHOT_FILE).exists() and not (outside / INDEX_FILE).exists()
    with pytest.raises(OutsideResults):
        make_run(root, seed=3)
    assert len(list(outside.iterdir())) == 1


def test_an_index_log_linked_elsewhere_is_not_appended_to(tmp_path: Path) -> None:
    root = tmp_path / "results"
    make_run(root)
    victim = tmp_path / "victim"
    victim.write_text("keep\n")
    log = root / "runs" / SUITE / INDEX_FILE
    log.unlink()
    log.symlink_to(victim)
    make_run(root, seed=5)
    store.load_runs(root)
    assert victim.read_text() == "keep\n"


def test_an_unreadable_suite_folder_is_one_line(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """`plot` on an unreadable folder was a PermissionError traceback (as root, chmod
    does not stop a read: the refusal is the kernel's, stood in for here)."""
    from harness.results import index

    root = tmp_path / "results"
    make_run(root)
    real = os.listdir

    def refuse(path: Any = ".") -> list[str]:
        if Path(path).name == SUITE:
            raise PermissionError(13, "Permission denied", str(path))
        return real(path)

    monkeypatch.setattr(index.os, "listdir", refuse)
    frame = store.load_runs(root)
    assert frame.empty and "Permission denied" in frame.attrs["skipped"][0]
    assert main(["plot", SUITE, "--results", str(root)]) == 2
    assert "Traceback" not in capsys.readouterr().err


def test_compare_takes_no_impossible_row(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    """`correct_drafts` 1000 on a block of 8 gave an accept length of 120.9 in `compare`."""
    root = tmp_path / "results"
    a, b = make_run(root, n=6, seed=1), make_run(root, n=6, seed=2)
    for run_dir in (a, b):
        _edit(run_dir, _block(8))
    rows = [json.loads(line) for line in (b / REQUESTS_FILE).read_text().splitlines()]
    for row in rows:
        row.update(correct_drafts=1000, verify_steps=10, completion_tokens=1210,
                   spec_accept_length=121.0)
    (b / REQUESTS_FILE).write_text("".join(json.dumps(r) + "\n" for r in rows))
    code = main(["compare", str(a), str(b)])
    captured = capsys.readouterr()
    assert code == 2 and "no request rows" in captured.err and "120.9" not in captured.out


def test_a_command_prints_a_bounded_number_of_skip_lines(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    from harness.results import skips

    monkeypatch.setattr(skips, "MAX_PRINTED", 200)
    with skips.reporting():
        for i in range(skips.MAX_PRINTED + 50):
            skips.report([], f"file{i}", "bad")
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == skips.MAX_PRINTED + 1 and "50 more skipped" in lines[-1]


def test_no_folder_is_made_through_a_link_out_of_the_results(tmp_path: Path) -> None:
    """A calibrations folder linked elsewhere: the write is refused before any folder is
    made there (calibrate's record goes through the same containment check)."""
    from harness.files import OutsideResults, atomic_write_text
    from harness.results.layout import CALIBRATIONS_DIR

    root, outside = tmp_path / "results", tmp_path / "outside"
    outside.mkdir()
    root.mkdir()
    (root / CALIBRATIONS_DIR).symlink_to(outside)
    with pytest.raises(OutsideResults):
        atomic_write_text(root / CALIBRATIONS_DIR / "suite" / "c.json", "{}\n", root)
    assert list(outside.iterdir()) == []
