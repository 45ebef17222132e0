"""Damaged files in a results folder (issue 20, cases 4-7), each as the issue found it:
impossible figures crash no plot and enter no trend or comparison; a FIFO or a 5 MB label
hangs nothing; duplicate keys, NaN, 10**400 are refused; a 0-byte run.json and an empty
requests.jsonl give one line naming the file. Every command ends with an exit code and
no traceback; each bad record is skipped with one line naming the file and the field."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from harness.cli import main
from harness.results import store
from harness.results.layout import REQUESTS_FILE, RUN_FILE
from tests.results.records import make_history, make_run

SUITE = "tiny_dflash_cpu"


def _history(tmp_path: Path) -> tuple[Path, list[Path]]:
    root = tmp_path / "results"
    return root, make_history(root, nights=3)


def _measurement(run_dir: Path, **changes: Any) -> None:
    data = json.loads((run_dir / RUN_FILE).read_text())
    data["measurement"].update(changes)
    (run_dir / RUN_FILE).write_text(json.dumps(data))


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out + captured.err


IMPOSSIBLE = [
    ({"accept_length": -3.0, "accept_length_per_request": -3.0}, "measurement.accept_length"),
    ({"accept_length": 0, "accept_length_per_request": 0}, "measurement.accept_length"),
    ({"accept_length_ci": [3.0, 2.0]}, "measurement.accept_length_ci"),
    ({"completion_tokens": 10, "verify_steps": 3760}, "measurement.completion_tokens"),
    ({"accept_length_per_request": 2.0}, "measurement.accept_length_per_request"),
    ({"accuracy": 1.5}, "measurement.accuracy"),
    ({"n_requests": -1}, "measurement.n_requests"),
]


@pytest.mark.parametrize(("changes", "field"), IMPOSSIBLE)
def test_impossible_figures_are_skipped_naming_file_and_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], changes: dict[str, Any], field: str
) -> None:
    root, runs = _history(tmp_path)
    bad = runs[-1]
    _measurement(bad, **changes)
    frame = store.load_runs(root)
    assert len(frame) == 2  # the bad record is not a row
    skipped = frame.attrs["skipped"]
    assert len(skipped) == 1 and str(bad) in skipped[0] and field in skipped[0]
    for args in (["plot", str(bad), "--results", str(root)],
                 ["plot", SUITE, "--results", str(root)], ["trend", SUITE, "--results", str(root)],
                 ["compare", str(runs[0]), str(bad), "--results", str(root)]):
        code, out = _cli(capsys, *args)
        assert "Traceback" not in out and "ValueError" not in out, args
        assert code in (0, 1, 2, 3), args
        if args[0] == "compare" or args[1] == str(bad):
            assert code == 2 and field in out and str(bad) in out, (args, out)


def test_a_figure_above_what_a_step_makes_is_impossible(tmp_path: Path) -> None:
    root, runs = _history(tmp_path)
    data = json.loads((runs[-1] / RUN_FILE).read_text())
    data["suite"]["document"]["speculative"] = {"block_size": 8}
    data["measurement"].update(accept_length=42.0, accept_length_per_request=42.0,
                               completion_tokens=42 * data["measurement"]["verify_steps"])
    (runs[-1] / RUN_FILE).write_text(json.dumps(data))
    skipped = store.load_runs(root).attrs["skipped"]
    assert len(skipped) == 1 and "block size 8 makes at most 8 tokens" in skipped[0]
    assert "per_request adds each request's prefill token (at most 1 per step): at most 9" \
        in skipped[0]


@pytest.mark.parametrize(("text", "why"), [
    ('{"measurement": {"accept_length": 2.5}, "measurement": {"accept_length": 42}}',
     "duplicate key 'measurement'"),
    ('{"measurement": {"accept_length": NaN}}', "NaN is not a JSON number"),
    ('{"measurement": {"accept_length": Infinity}}', "Infinity is not a JSON number"),
    ('{"measurement": {"completion_tokens": 1' + "0" * 400 + "}}", "beyond 64 bits"),
])  # fmt: skip
def test_strict_json(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str,
                     why: str) -> None:
    root, runs = _history(tmp_path)
    good = json.loads((runs[-1] / RUN_FILE).read_text())
    # the damage spliced into an otherwise valid record
    body = json.dumps({k: v for k, v in good.items() if k != "measurement"})
    damaged = body[:-1] + ", " + text.strip()[1:]
    (runs[-1] / RUN_FILE).write_text(damaged)
    skipped = store.load_runs(root).attrs["skipped"]
    assert len(skipped) == 1 and why in skipped[0]
    code, out = _cli(capsys, "compare", str(runs[0]), str(runs[-1]))
    assert code == 2 and why in out and "Traceback" not in out
    code, out = _cli(capsys, "plot", str(runs[-1]))
    assert code == 2 and why in out and len(out.strip().splitlines()) == 1


def test_a_zero_byte_run_json_is_one_line(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    _, runs = _history(tmp_path)
    (runs[-1] / RUN_FILE).write_bytes(b"")
    for args in (["plot", str(runs[-1])], ["compare", str(runs[0]), str(runs[-1])]):
        code, out = _cli(capsys, *args)
        assert code == 2, out
        lines = out.strip().splitlines()
        assert len(lines) == 1 and str(runs[-1]) in lines[0] and "empty" in lines[0], out
        assert "pydantic" not in out and "validation error" not in out


def test_an_empty_requests_file_gives_no_figure(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    _, runs = _history(tmp_path)
    (runs[-1] / REQUESTS_FILE).write_bytes(b"")
    code, out = _cli(capsys, "compare", str(runs[0]), str(runs[-1]))
    assert code == 2
    assert out.strip().splitlines() == [
        f"harness compare: {runs[-1] / REQUESTS_FILE}: no request rows (empty, missing or all "
        "unusable): no figure without requests"]
    assert "questions" not in out


def _run_cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    return subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True,
                          text=True, timeout=timeout, env=env)


def test_a_fifo_never_hangs(tmp_path: Path) -> None:
    root, runs = _history(tmp_path)
    (runs[-1] / RUN_FILE).unlink()
    os.mkfifo(runs[-1] / RUN_FILE)
    (runs[0] / REQUESTS_FILE).unlink()
    os.mkfifo(runs[0] / REQUESTS_FILE)
    for args in (["trend", SUITE, "--results", str(root)], ["plot", str(runs[-1])],
                 ["compare", str(runs[1]), str(runs[0])]):
        done = _run_cli(*args)  # a hang would be a TimeoutExpired
        assert "Traceback" not in done.stderr, done.stderr
        assert "not a regular file" in done.stderr, (args, done.stderr)
    from harness.results.layout import INDEX_FILE, SNAPSHOT_FILE

    for name in (INDEX_FILE, SNAPSHOT_FILE):  # the loader's own index files, too
        index = root / "runs" / SUITE / name
        index.unlink(missing_ok=True)
        os.mkfifo(index)
        done = _run_cli("trend", SUITE, "--results", str(root))
        assert "Traceback" not in done.stderr, done.stderr
        index.unlink()


def test_a_5_mb_label_never_hangs(tmp_path: Path) -> None:
    root = tmp_path / "results"
    run_dir = make_run(root)
    data = json.loads((run_dir / RUN_FILE).read_text())
    data["label"] = "x" * 5_000_000
    (run_dir / RUN_FILE).write_text(json.dumps(data))
    done = _run_cli("plot", str(run_dir), timeout=60)
    assert done.returncode == 2 and "label: 5000000 characters" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_ci_that_misses_its_figure_is_refused(tmp_path: Path) -> None:
    """Issue 29: a figure outside its own interval is a forged or damaged record (the
    harness's percentile bootstrap of a ratio of sums holds its figure): refused by the
    single-run reader, skipped by the loader, with the field named."""
    from harness.analysis import plots
    from harness.errors import BadInput

    run_dir = make_run(tmp_path / "results")
    data = json.loads((run_dir / RUN_FILE).read_text())
    value = data["measurement"]["accept_length"]
    _measurement(run_dir, accept_length_ci=[value + 0.1, value + 0.2])
    with pytest.raises(BadInput, match="outside its own interval"):
        plots.plot_run(run_dir)
    frame = store.load_runs(tmp_path / "results")
    assert frame.empty
    assert any("measurement.accept_length_ci" in line for line in frame.attrs["skipped"])


@pytest.mark.parametrize("changes", [
    # UNO (SGLang 0.5.20+): each verify step makes its correct drafts and 2 more tokens
    {"correct_drafts": 1000, "verify_steps": 500, "completion_tokens": 2000,
     "accept_length_server_avg": 4.0, "accept_length_per_request": 4.0},
    # two prefill-only requests: their tokens are in completion_tokens, in no pooled figure
    {"correct_drafts": 1000, "verify_steps": 500, "completion_tokens": 1502,
     "accept_length_server_avg": 3.0, "accept_length_per_request": 3.0},
])
def test_possible_figures_are_kept(tmp_path: Path, changes: dict[str, Any]) -> None:
    root, runs = _history(tmp_path)
    data = json.loads((runs[-1] / RUN_FILE).read_text())
    metric = data["measurement"]["metric"]
    _measurement(runs[-1], **changes, accept_length=changes[f"accept_length_{metric}"],
                 accept_length_ci=None)
    frame = store.load_runs(root)
    assert len(frame) == 3 and frame.attrs["skipped"] == []
