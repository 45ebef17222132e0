"""results/ as a database: concurrent writers, tolerant loading, the per-suite index."""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
from pathlib import Path

import pandas as pd
import pytest

from harness import files
from harness.results import index as runs_index
from harness.results import layout, readers, record, store, writer
from harness.results.baselines import load_baselines
from harness.results.layout import REQUESTS_FILE, RUN_FILE
from harness.results.rows import READS_SCHEMA, RUN_COLUMNS
from tests.results.records import make_run

SUITE = "tiny_dflash_cpu"


def _log(results: Path, suite: str = SUITE) -> Path:
    return results / "runs" / suite / layout.INDEX_FILE


def _snapshot(results: Path, suite: str = SUITE) -> Path:
    return results / "runs" / suite / layout.SNAPSHOT_FILE


def _indexed(results: Path) -> list[str]:
    """Run folder names the index holds: its snapshot's, then each logged line's."""
    names = json.loads(_snapshot(results).read_text())["names"] if _snapshot(results).exists() \
        else []  # fmt: skip
    return names + [json.loads(line)[1] for line in _log(results).read_text().splitlines()]


def _writer(root: str, worker: int, count: int) -> None:
    for i in range(count):
        make_run(Path(root), 2.5, n=5, seed=worker * 1000 + i, label=f"w{worker}")
        if i % 10 == 0:
            store.load_runs(root)  # readers run alongside writers and repair the index


def test_concurrent_writers_lose_nothing(results: Path) -> None:
    context = multiprocessing.get_context("spawn" if os.name == "nt" else "fork")
    workers = [context.Process(target=_writer, args=(str(results), w, 50)) for w in range(8)]
    for process in workers:
        process.start()
    for process in workers:
        process.join(120)
        assert process.exitcode == 0
    runs = store.load_runs(results)
    assert len(runs) == 400
    assert runs["run_id"].is_unique
    assert runs.groupby("label").size().to_dict() == {f"w{w}": 50 for w in range(8)}
    assert runs.attrs["skipped"] == []
    parsed = store.load_runs(results, use_cache=False)
    pd.testing.assert_frame_equal(runs, parsed)  # the index holds exactly what the files say
    assert len(store.load_requests(results)) == 400 * 5


def test_the_writer_indexes_each_record(results: Path) -> None:
    first = make_run(results, 2.5)
    assert not _snapshot(results).exists()
    assert json.loads(_log(results).read_text())[:2] == [runs_index.TAG, first.name]
    assert _indexed(results) == [first.name]
    second = make_run(results, 2.4)
    assert _indexed(results) == [first.name, second.name]
    # a load that finds the index current parses no run.json: change one under the index's
    # feet, keeping its size and mtime, and the load still returns the indexed row
    stamp = os.stat(first / RUN_FILE)
    text = (first / RUN_FILE).read_text()
    version = f'"schema_version": {record.SCHEMA_VERSION}'
    (first / RUN_FILE).write_text(text.replace(version, '"schema_version": 9'))
    os.utime(first / RUN_FILE, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    assert len(store.load_runs(results)) == 2
    assert len(store.load_runs(results, use_cache=False)) == 1  # parsed: newer than it reads


def test_bad_files_are_reported_skipped_and_left_alone(
    results: Path, caplog: pytest.LogCaptureFixture
) -> None:
    make_run(results, 2.5)
    bad = _damage(results)
    before = {name: file.read_bytes() for name, file in bad.items()}
    with caplog.at_level(logging.WARNING, logger="harness.results.store"):
        runs = store.load_runs(results)
    assert len(runs) == 1
    skipped = runs.attrs["skipped"]
    assert len(skipped) == len(bad)
    for name, file in bad.items():
        assert sum(str(file) in message for message in skipped) == 1, name
        assert caplog.text.count(str(file)) == 1
        assert file.read_bytes() == before[name]  # never rewritten
    assert any("newer" in m and f"schema_version {READS_SCHEMA + 1}" in m for m in skipped)
    assert any("foreign" in m and "not a harness run record" in m for m in skipped)
    assert any("nested" in m and "measurement: expected an object, got a list" in m
               for m in skipped)  # fmt: skip
    assert any("verdict" in m and "verdict: expected an object, got a string" in m
               for m in skipped)  # fmt: skip
    assert any("yesterday" in m and "started_at: not an ISO 8601 time" in m for m in skipped)
    # never indexed: a second load reports them again (a library call is its own scope)
    assert len(store.load_runs(results).attrs["skipped"]) == len(bad)
    assert len(_indexed(results)) == 1


def _damage(results: Path) -> dict[str, Path]:
    folder = results / "runs" / SUITE
    good = json.loads(next(folder.glob(f"*/{RUN_FILE}")).read_text())
    bad = {}
    for name, text in {
        "truncated": '{"schema_version": 1, "run_id": "x", "suite": {"na',
        "empty": "",
        "foreign": json.dumps({"hello": "world"}),
        "array": "[1, 2, 3]",
        "newer": json.dumps(dict(good, schema_version=READS_SCHEMA + 1)),
        "binary": b"\xff\xfe\x00garbage",
        "nested": json.dumps(dict(good, measurement=[1, 2, 3])),
        "verdict": json.dumps(dict(good, verdict="pass")),
        "yesterday": json.dumps(dict(good, started_at="yesterday")),
    }.items():
        run_dir = folder / f"20250101T000000Z-{name}"
        run_dir.mkdir(parents=True)
        file = run_dir / RUN_FILE
        if isinstance(text, bytes):
            file.write_bytes(text)
        else:
            file.write_text(text)
        bad[name] = file
    return bad


def test_run_folder_without_run_json_is_not_an_error(results: Path) -> None:
    make_run(results, 2.5)
    (results / "runs" / SUITE / "20250101T000000Z-pending").mkdir()
    runs = store.load_runs(results)
    assert len(runs) == 1 and runs.attrs["skipped"] == []


def test_stray_files_are_reported(results: Path) -> None:
    make_run(results, 2.5)
    (results / "runs" / SUITE / "notes.txt").write_text("hello")
    (results / "runs" / "README").write_text("hello")
    (results / "baselines").mkdir()
    (results / "baselines" / "notes.txt").write_text("hello")
    skipped = store.load_runs(results).attrs["skipped"]
    assert len(skipped) == 3
    assert any("notes.txt: not a run folder" in m for m in skipped)
    assert any("README: not a suite folder" in m for m in skipped)
    assert any("baselines/notes.txt: not a baseline record" in m for m in skipped)


def test_a_record_in_another_suites_folder_is_reported(results: Path) -> None:
    run_dir = make_run(results, 2.5)
    moved = results / "runs" / "other" / run_dir.name
    moved.parent.mkdir(parents=True)
    run_dir.rename(moved)
    runs = store.load_runs(results)
    assert runs.empty
    assert "is not its folder's ('other')" in runs.attrs["skipped"][0]


def test_index_sees_new_runs_late_run_json_and_removed_runs(results: Path) -> None:
    make_run(results, 2.5)
    pending = results / "runs" / SUITE / "20250101T000000Z-late"
    pending.mkdir()
    assert len(store.load_runs(results)) == 1
    second = make_run(results, 2.4)
    assert len(store.load_runs(results)) == 2
    # run.json appears in a folder that existed at the last load, written by hand
    record_json = json.loads((second / RUN_FILE).read_text())
    record_json["run_id"] = "late0001"
    (pending / RUN_FILE).write_text(json.dumps(record_json))
    runs = store.load_runs(results)
    assert len(runs) == 3 and "late0001" in set(runs["run_id"])
    assert pending.name in _indexed(results)  # indexed by the load
    (second / RUN_FILE).unlink()
    (second / REQUESTS_FILE).unlink()
    second.rmdir()
    assert len(store.load_runs(results)) == 2


def test_a_rewritten_record_is_read_again(results: Path) -> None:
    run_dir = make_run(results, 2.5)
    assert store.load_runs(results)["label"].iloc[0] is None
    saved = readers.read_run(run_dir)
    saved.label = "relabelled"
    writer.write_run(run_dir, saved)  # the writer appends a new line: the last one counts
    assert store.load_runs(results)["label"].iloc[0] == "relabelled"
    data = json.loads((run_dir / RUN_FILE).read_text())
    data["label"] = "by hand"  # an edit outside the writer: its stamp changes
    (run_dir / RUN_FILE).write_text(json.dumps(data, indent=1))
    assert store.load_runs(results)["label"].iloc[0] == "by hand"


@pytest.mark.parametrize("damage", ["garbage", "torn", "format", "foreign_line", "snapshot",
                                    "no_snapshot", "no_log", "other_version"])
def test_the_index_is_only_a_copy(
    results: Path, damage: str, caplog: pytest.LogCaptureFixture
) -> None:
    for seed in range(3):
        make_run(results, 2.5, seed=seed)
    store.load_runs(results)  # folds the log into a snapshot
    make_run(results, 2.5, seed=3)  # and one line in the log
    expected = store.load_runs(results, use_cache=False)
    snapshot, log = _snapshot(results), _log(results)
    text, line = snapshot.read_text(), log.read_text()
    if damage == "garbage":
        snapshot.write_text("{damaged")
    elif damage == "torn":
        log.write_text(line[: len(line) - 40])  # a writer killed mid-line
    elif damage == "format":
        snapshot.write_text(text.replace(f'"index": {runs_index.INDEX_FORMAT}', '"index": 99'))
    elif damage == "foreign_line":
        log.write_text(line + '["x", 1]\n')
    elif damage == "snapshot":
        snapshot.write_text(text.replace('"names": [', '"names": ["x", '))
    elif damage == "no_snapshot":
        snapshot.unlink()
    elif damage == "no_log":
        log.unlink()
    else:
        log.write_text(line.replace(runs_index.TAG, "1:00000000"))
    with caplog.at_level(logging.WARNING, logger="harness.results.store"):
        runs = store.load_runs(results)
    pd.testing.assert_frame_equal(runs, expected)
    corrupt = damage in ("garbage", "torn", "foreign_line", "snapshot")
    assert ("corrupt index" in caplog.text) == corrupt
    assert len(runs.attrs["skipped"]) == corrupt
    assert all("corrupt index" in message for message in runs.attrs["skipped"])
    # repaired: the next load reports nothing and the index has each run once
    assert store.load_runs(results).attrs["skipped"] == []
    assert sorted(_indexed(results)) == sorted(p.name for p in (results / "runs" / SUITE).iterdir()
                                               if p.is_dir())  # fmt: skip


def test_the_writer_compacts_a_long_log(results: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runs_index, "LOG_LIMIT", 1500)  # about three lines
    dirs = [make_run(results, 2.5, n=5, seed=seed) for seed in range(8)]
    assert _snapshot(results).exists()  # no load ran: the writer folded its log
    assert len(_log(results).read_text().splitlines()) < 8
    assert sorted(_indexed(results)) == sorted(d.name for d in dirs)
    parsed = store.load_runs(results, use_cache=False)
    pd.testing.assert_frame_equal(store.load_runs(results), parsed)


def test_the_index_is_compacted(results: Path) -> None:
    run_dir = make_run(results, 2.5)
    saved = readers.read_run(run_dir)
    for i in range(40):
        saved.label = f"v{i}"
        writer.write_run(run_dir, saved)
    assert _indexed(results) == [run_dir.name] * 41
    runs = store.load_runs(results)
    assert list(runs["label"]) == ["v39"]
    assert _log(results).read_text() == ""  # folded into the snapshot
    assert _indexed(results) == [run_dir.name]
    assert list(store.load_runs(results)["label"]) == ["v39"]  # read from the snapshot


def test_use_cache_false_leaves_the_index_alone(results: Path) -> None:
    make_run(results, 2.5)
    _log(results).unlink()
    assert len(store.load_runs(results, use_cache=False)) == 1
    assert not _log(results).exists() and not _snapshot(results).exists()
    assert len(store.load_runs(results)) == 1
    assert _snapshot(results).exists()  # rebuilt from the run folders


def test_paths_follow_a_moved_results_folder(tmp_path: Path) -> None:
    make_run(tmp_path / "a", 2.5)
    store.load_runs(tmp_path / "a")
    (tmp_path / "a").rename(tmp_path / "b")
    runs = store.load_runs(tmp_path / "b")
    assert Path(runs["path"].iloc[0]).is_dir()
    assert str(tmp_path / "b") in runs["path"].iloc[0]


def test_rows_carry_flattened_fields(results: Path) -> None:
    run_dir = make_run(results, 2.5, label="x", spec="sglang==0.5.23")
    frame = store.load_runs(results)
    assert list(frame.columns) == list(RUN_COLUMNS)
    row = frame.iloc[0]
    assert row["suite"] == SUITE and row["label"] == "x"
    assert row["build.spec"] == "sglang==0.5.23" and row["build.engine"] == "reference"
    assert row["ci_low"] < row["accept_length"] < row["ci_high"]
    assert row["floor"] == 2.0 and row["verdict"] == "pass" and row["n_requests"] == 40
    assert Path(row["path"]) == run_dir
    assert str(row["started_at"].tz) == "UTC"


def test_version_1_records_read_as_per_request(results: Path) -> None:
    run_dir = make_run(results, 2.5)
    data = json.loads((run_dir / RUN_FILE).read_text())
    data["schema_version"] = 1  # as the v1 writer wrote it: no metric, no figures beside
    for key in ("metric", "accept_length_per_request", "accept_length_server_avg", "partial",
                "n_planned", "correct_drafts", "server_reported_accept_length"):
        data["measurement"].pop(key, None)
    data["measurement"]["server_accept_length"] = 2.45
    (run_dir / RUN_FILE).write_text(json.dumps(data))
    row = store.load_runs(results).iloc[0]
    assert row["schema_version"] == 1 and row["metric"] == "per_request"
    assert row["accept_length_per_request"] == row["accept_length"]
    assert pd.isna(row["accept_length_server_avg"])
    assert row["server_reported_accept_length"] == 2.45
    assert not row["partial"] and row["n_finished"] == row["n_requests"] == 40


def test_external_baselines_have_no_time_or_verdict() -> None:
    root = Path(__file__).resolve().parents[2] / "results"
    frame = store.load_runs(root, suite="gemma4_dflash_31b", kind="baseline")
    assert frame.attrs["skipped"] == [] and len(frame) == 3
    assert frame["external"].all() and frame["started_at"].isna().all()
    assert frame["verdict"].isna().all() and set(frame["metric"]) == {"server_avg"}


def test_version_2_columns(results: Path) -> None:
    run_dir = make_run(results, 2.5)
    data = json.loads((run_dir / RUN_FILE).read_text())
    data["schema_version"] = 2
    measurement = data["measurement"]
    steps = measurement["verify_steps"]  # figures consistent with the counts (as a run's are)
    measurement.update(metric="server_avg", accept_length=2.4, accept_length_server_avg=2.4,
                       accept_length_per_request=2.5, completion_tokens=round(2.5 * steps),
                       correct_drafts=round(1.4 * steps), n_finished=30,
                       n_planned=40, partial=True, server_reported_accept_length=2.41,
                       accept_length_ci=[2.3, 2.5])  # the CI of the metric's figure
    measurement.pop("server_accept_length", None)
    (run_dir / RUN_FILE).write_text(json.dumps(data))
    row = store.load_runs(results).iloc[0]
    assert row["metric"] == "server_avg" and row["accept_length"] == 2.4
    assert row["accept_length_server_avg"] == 2.4 and row["accept_length_per_request"] == 2.5
    assert row["partial"] and row["n_finished"] == 30 and row["n_planned"] == 40
    assert row["correct_drafts"] == round(1.4 * steps)
    assert row["server_reported_accept_length"] == 2.41


def test_load_requests_skips_bad_lines(results: Path) -> None:
    run_dir = make_run(results, 2.5, n=10)
    with open(run_dir / REQUESTS_FILE, "a") as handle:
        handle.write("{not json\n")
        handle.write('{"question_index": 1, "completion_tokens": "many", "verify_steps": 2}\n')
        handle.write("[1, 2]\n")
    frame = store.load_requests(run_dir)
    assert len(frame) == 10
    assert set(frame["run_id"]) == {json.loads((run_dir / RUN_FILE).read_text())["run_id"]}
    skipped = frame.attrs["skipped"]
    assert len(skipped) == 3
    assert any("line 11" in m for m in skipped)
    assert any("line 12" in m and "completion_tokens: expected a non-negative integer" in m
               for m in skipped)  # fmt: skip


def test_shipped_baselines_load() -> None:
    root = Path(__file__).resolve().parents[2] / "results"
    figures = load_baselines(root, "gemma4_dflash_31b")
    assert [(f.label, f.accept_length) for f in figures] == [
        ("pre-fix", 5.27), ("post-fix", 5.62), ("post-fix CI rerun", 5.6333)
    ]
    assert all(f.source and "34524" in f.source for f in figures)
    assert store.load_runs(root, kind="baseline").attrs["skipped"] == []


def test_new_run_dir_refuses_to_share_a_folder(results: Path) -> None:
    run_dir = make_run(results, 2.5)
    saved = readers.read_run(run_dir)
    with pytest.raises(FileExistsError):
        writer.save_run(results, saved)


def test_one_results_dir_definition(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(files.RESULTS_ENV, raising=False)
    assert files.default_results_dir() == files.RESULTS_DIR == Path("results")
    monkeypatch.setenv(files.RESULTS_ENV, str(tmp_path))
    assert files.default_results_dir() == tmp_path
    run_dir = make_run(tmp_path)
    assert list(store.load_runs()["path"]) == [str(run_dir)]  # the store's default folder


def test_the_loader_reads_the_schema_the_writer_writes() -> None:
    assert 1 <= record.SCHEMA_VERSION <= READS_SCHEMA


def _same(a: object, b: object) -> bool:
    return (a is None and b != b) or (a == b and type(a) is type(b)) or (
        isinstance(a, int) and not isinstance(a, bool) and isinstance(b, float) and a == b)


def test_index_encodings_round_trip() -> None:
    from hypothesis import given, settings
    from hypothesis import strategies as st

    scalars = st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=4) \
        | st.floats(allow_nan=False, allow_infinity=False)  # fmt: skip
    numbers = st.none() | st.integers(-(2**53), 2**53) | st.floats(allow_nan=False,
                                                                    allow_infinity=False)

    @settings(max_examples=300, derandomize=True, deadline=None)
    @given(st.lists(scalars, max_size=40), st.lists(numbers, max_size=40),
           st.lists(st.integers(-(2**63), 2**63 - 1), max_size=40))
    def round_trip(values: list, floats: list, stamps: list) -> None:
        encoded = json.loads(json.dumps(runs_index._encode(values)))
        assert [(v, type(v)) for v in runs_index._decode(encoded, len(values))] == \
            [(v, type(v)) for v in values]  # fmt: skip
        encoded = json.loads(json.dumps(runs_index._encode(floats, "d")))
        decoded = list(runs_index._decode(encoded, len(floats)))
        assert all(_same(a, b) or a == b for a, b in zip(floats, decoded, strict=True))
        encoded = json.loads(json.dumps(runs_index._encode(stamps, "q")))
        assert runs_index._decode(encoded, len(stamps)) == stamps

    round_trip()


def test_a_build_without_a_spec_is_named_by_engine_and_version() -> None:
    from harness.analysis.sides import _build_name

    row = {"build.spec": None, "build.engine": "reference", "build.version": "0.1.0"}
    assert _build_name(row) == "reference 0.1.0"
    assert _build_name({**row, "build.spec": "reference:noise=0.1"}) == "reference:noise=0.1"
    assert _build_name({**row, "build.engine": None, "build.version": None}) == "-"
