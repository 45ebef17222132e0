"""results/ as a database: concurrent writers, tolerant loading, the loader cache."""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
from pathlib import Path

import pytest

from harness import runs_index, store
from harness.baselines import load_baselines
from harness.record import REQUESTS_FILE, RUN_FILE
from tests.analysis.records import make_run


def _writer(root: str, worker: int, count: int) -> None:
    for i in range(count):
        make_run(Path(root), 2.5, n=5, seed=worker * 1000 + i, label=f"w{worker}")
        if i % 10 == 0:
            store.load_runs(root)  # readers run alongside writers and update the cache


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
    assert len(store.load_runs(results, use_cache=False)) == 400
    assert len(store.load_requests(results)) == 400 * 5


def _damage(results: Path) -> dict[str, Path]:
    folder = results / "runs" / "tiny_dflash_cpu"
    bad = {}
    for name, text in {
        "truncated": '{"schema_version": 1, "run_id": "x", "suite": {"na',
        "empty": "",
        "foreign": json.dumps({"hello": "world"}),
        "array": "[1, 2, 3]",
        "newer": json.dumps({"schema_version": 99, "run_id": "n", "suite": {"name": "t"},
                             "started_at": "2025-01-01T00:00:00Z"}),
        "binary": b"\xff\xfe\x00garbage",
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


def test_bad_files_are_reported_skipped_and_left_alone(
    results: Path, caplog: pytest.LogCaptureFixture
) -> None:
    make_run(results, 2.5)
    bad = _damage(results)
    before = {name: file.read_bytes() for name, file in bad.items()}
    with caplog.at_level(logging.WARNING, logger="harness.store"):
        runs = store.load_runs(results)
    assert len(runs) == 1
    skipped = runs.attrs["skipped"]
    assert len(skipped) == len(bad)
    for name, file in bad.items():
        assert any(str(file) in message for message in skipped), name
        assert str(file) in caplog.text
        assert file.read_bytes() == before[name]  # never rewritten
    assert any("newer" in m and "schema_version 99" in m for m in skipped)
    assert any("foreign" in m and "not a harness run record" in m for m in skipped)
    # a cached load still reports them (they are never cached)
    assert len(store.load_runs(results).attrs["skipped"]) == len(bad)


def test_run_folder_without_run_json_is_not_an_error(results: Path) -> None:
    make_run(results, 2.5)
    (results / "runs" / "tiny_dflash_cpu" / "20250101T000000Z-pending").mkdir()
    runs = store.load_runs(results)
    assert len(runs) == 1 and runs.attrs["skipped"] == []


def test_cache_sees_new_runs_and_late_run_json(results: Path) -> None:
    make_run(results, 2.5)
    pending = results / "runs" / "tiny_dflash_cpu" / "20250101T000000Z-late"
    pending.mkdir()
    assert len(store.load_runs(results)) == 1
    assert (results / runs_index.CACHE_FILE).exists()
    make_run(results, 2.4)
    assert len(store.load_runs(results)) == 2
    # run.json appears in a folder that existed at the last load
    source = next(p for p in (results / "runs" / "tiny_dflash_cpu").iterdir() if p != pending)
    record = json.loads((source / RUN_FILE).read_text())
    record["run_id"] = "late0001"
    (pending / RUN_FILE).write_text(json.dumps(record))
    runs = store.load_runs(results)
    assert len(runs) == 3 and "late0001" in set(runs["run_id"])


def test_cache_is_only_a_copy(results: Path) -> None:
    make_run(results, 2.5)
    store.load_runs(results)
    (results / runs_index.CACHE_FILE).write_text("{damaged")
    assert len(store.load_runs(results)) == 1
    cache = json.loads((results / runs_index.CACHE_FILE).read_text())
    assert cache["format"] == runs_index.CACHE_FORMAT


def test_paths_follow_a_moved_results_folder(tmp_path: Path) -> None:
    make_run(tmp_path / "a", 2.5)
    store.load_runs(tmp_path / "a")
    (tmp_path / "a").rename(tmp_path / "b")
    runs = store.load_runs(tmp_path / "b")
    assert Path(runs["path"].iloc[0]).is_dir()
    assert str(tmp_path / "b") in runs["path"].iloc[0]


def test_rows_carry_flattened_fields(results: Path) -> None:
    run_dir = make_run(results, 2.5, label="x", spec="sglang==0.5.23")
    row = store.load_runs(results).iloc[0]
    assert row["suite"] == "tiny_dflash_cpu" and row["label"] == "x"
    assert row["build.spec"] == "sglang==0.5.23" and row["build.engine"] == "reference"
    assert row["ci_low"] < row["accept_length"] < row["ci_high"]
    assert row["floor"] == 2.0 and row["verdict"] == "pass" and row["n_requests"] == 40
    assert Path(row["path"]) == run_dir
    assert str(row["started_at"].tz) == "UTC"


def test_load_requests_skips_bad_lines(results: Path) -> None:
    run_dir = make_run(results, 2.5, n=10)
    with open(run_dir / REQUESTS_FILE, "a") as handle:
        handle.write("{not json\n")
    frame = store.load_requests(run_dir)
    assert len(frame) == 10
    assert set(frame["run_id"]) == {json.loads((run_dir / RUN_FILE).read_text())["run_id"]}
    assert any("line 11" in message for message in frame.attrs["skipped"])


def test_shipped_baselines_load() -> None:
    root = Path(__file__).resolve().parents[2] / "results"
    figures = load_baselines(root, "gemma4_dflash_31b")
    assert [(f.label, f.accept_length) for f in figures] == [
        ("pre-fix", 5.27), ("post-fix", 5.62), ("post-fix CI rerun", 5.6333)
    ]
    assert all(f.source and "34524" in f.source for f in figures)


def test_new_run_dir_refuses_to_share_a_folder(results: Path) -> None:
    run_dir = make_run(results, 2.5)
    record = store.read_run(run_dir)
    with pytest.raises(FileExistsError):
        store.save_run(results, record)
