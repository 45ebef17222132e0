"""`harness export` on a run it cannot use: a missing folder, a damaged run.json or
requests.jsonl, any bytes in either: exit 2 and one line naming the file, no traceback,
nothing written (an earlier export stays whole)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.cli import main
from harness.commands.parsers.export import DEFAULT_NAMES


def export(run: Path, fmt: str = "vllm-bench") -> int:
    return main(["export", str(run), "--format", fmt])


def test_missing_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert export(tmp_path / "nowhere") == 2
    assert "nowhere: not a run folder" in capsys.readouterr().err


@pytest.mark.parametrize(("name", "damage", "said"), [
    ("run.json", b'{"run_id": ', "run.json: not valid JSON"),
    ("run.json", None, "run.json: missing"),
    ("requests.jsonl", b'{"question_index": 0}\n', "requests.jsonl line 1"),
    ("requests.jsonl", None, "requests.jsonl: missing"),
])
def test_damaged_file_named(run_copy: Callable[[], Path], capsys: pytest.CaptureFixture[str],
                            name: str, damage: bytes | None, said: str) -> None:
    run = run_copy()
    if damage is None:
        (run / name).unlink()
    else:
        (run / name).write_bytes(damage)
    for fmt in ("aiperf", "vllm-bench"):
        assert export(run, fmt) == 2
        err = capsys.readouterr().err
        assert said in err and "Traceback" not in err
        assert err.startswith("harness export: ")
    assert not (run / "profile_export.jsonl").exists()
    assert not (run / "vllm_bench_serve.json").exists()


def test_run_without_measurement(run_copy: Callable[[], Path],
                                 capsys: pytest.CaptureFixture[str]) -> None:
    run = run_copy()
    record = json.loads((run / "run.json").read_text())
    record["measurement"] = None
    record["verdict"] = {"status": "error", "reasons": ["server died"]}
    (run / "run.json").write_text(json.dumps(record))
    assert export(run) == 2
    assert "no measurement (verdict error)" in capsys.readouterr().err


JSON_ISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                               max_size=4), max_leaves=12)


@settings(max_examples=40, deadline=None, suppress_health_check=[
    HealthCheck.function_scoped_fixture])
@given(name=st.sampled_from(["run.json", "requests.jsonl"]),
       content=st.binary(max_size=300) | JSON_ISH.map(lambda v: json.dumps(v).encode()),
       field=st.sampled_from(["completion_tokens", "verify_steps", "timing",
                              "correct_drafts", "latency_s"]),
       value=JSON_ISH | st.just("7") | st.just(10**30) | st.just(0))
def test_any_damage_is_exit_2_or_a_whole_export(run_copy: Callable[[], Path], name: str,
                                                content: bytes, field: str, value: object,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """Any bytes in either file, or any value in one field of every request row: a whole
    export (the damage was harmless) or exit 2 naming the file, never a traceback."""
    run = run_copy()
    earlier = run / "vllm_bench_serve.json"
    earlier.write_text("{}")
    if name == "requests.jsonl" and content[:1] == b"{":
        rows = [json.loads(line) for line in (run / name).read_text().splitlines()]
        content = "".join(json.dumps({**row, field: value}) + "\n" for row in rows).encode()
    (run / name).write_bytes(content)
    code = export(run)
    err = capsys.readouterr().err
    assert code in (0, 2), err
    if code == 2:
        assert name in err and "Traceback" not in err
        assert earlier.read_text() == "{}"
    else:
        json.loads(earlier.read_text())


def test_unwritable_out_named(run_copy: Callable[[], Path], tmp_path: Path,
                              capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "a file"
    blocker.write_text("not a folder")
    assert main(["export", str(run_copy()), "--format", "aiperf", "--out",
                 str(blocker / "out.jsonl")]) == 2
    err = capsys.readouterr().err
    assert "out.jsonl: cannot write" in err and "Traceback" not in err


def test_unknown_run_id_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "runs").mkdir()
    assert main(["export", "abcdef12", "--format", "aiperf", "--results", str(tmp_path)]) == 2
    assert "abcdef12: no run with that id" in capsys.readouterr().err


@pytest.mark.parametrize("out", [None, "-"])
def test_empty_rows_refused_by_every_export_as_by_compare(
        run_copy: Callable[[], Path], capsys: pytest.CaptureFixture[str],
        out: str | None) -> None:
    """A 0-byte requests.jsonl (a run killed before its first row): every export format
    refuses it as `compare` does, through the one door (readers.read_measured_requests):
    exit 2, the file named, nothing written (no AIPerf file of 0 lines, no summary of
    `completed: 0`)."""
    run = run_copy()
    (run / "requests.jsonl").write_bytes(b"")
    said = f"{run / 'requests.jsonl'}: no request rows"
    for fmt in DEFAULT_NAMES:
        assert main(["export", str(run), "--format", fmt,
                     *(["--out", out] if out else [])]) == 2, fmt
        captured = capsys.readouterr()
        assert said in captured.err and "Traceback" not in captured.err, captured.err
        assert captured.out == "", fmt
        assert not (run / DEFAULT_NAMES[fmt]).exists()
    assert main(["compare", str(run), str(run_copy())]) == 2
    assert said in capsys.readouterr().err
