"""`harness soak` against the SGLang test double (SGLang 0.5.23's own bookkeeping, its
radix prefix cache on by default): a steady server passes the drift gate with every
window's figure, definition and CI recorded and read back through the door; Ctrl-C in the
middle of a soak keeps the windows measured so far in the soak's record (exit 130), and
leaves no server process behind; a server that dies mid-soak is named (exit 3), its windows
kept, and no drift gate passes on it."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.cli import main
from harness.results.readers import read_requests, read_run, read_soak
from harness.results.soaks import SOAK_FILE
from tests.fixtures import sglang_double as double


def _suite(tmp_path: Path) -> Path:
    return double.suite_file(tmp_path, "fake_soak", floor=1.0, questions=4)


def _soak_folder(results: Path) -> Path:
    [found] = [p.parent for p in (results / "soak" / "fake_soak").glob(f"*/{SOAK_FILE}")]
    return found


def test_a_steady_server_passes_with_every_window_recorded(
        fake_env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("FAKE_SGLANG_DELAY_S", "0.05")  # a few dozen requests a window
    results = tmp_path / "results"
    code = main(["soak", str(_suite(tmp_path)), "--duration", "4s", "--window", "1s",
                 "--results", str(results), "--no-progress"])
    out = capsys.readouterr().out
    assert code == 0, out
    folder = _soak_folder(results)
    record = read_soak(folder)
    assert record.status == "pass" and record.series == "fake_soak-soak"
    assert record.prefix_cache.startswith("sglang: prefix caching on by default")
    assert record.metric == "server_avg" and "server_avg" in record.window_definition
    assert [w.index for w in record.windows] == [0, 1, 2, 3]
    for window in record.windows:  # each window measured, with its CI
        assert window.n_requests > 4 and window.accept_length is not None
        assert window.ci is not None and window.ci[0] <= window.accept_length <= window.ci[1]
    assert record.drift is not None and record.drift.status == "pass"
    assert record.drift.result is not None and record.drift.result["n_questions"] == 4
    run_dir = results / str(record.run_dir)
    run = read_run(run_dir)
    rows = read_requests(run_dir, run)
    assert run.measurement is not None and run.measurement.n_requests == len(rows)
    assert len(rows) == sum(w.n_requests for w in record.windows)
    assert len({row.question_index for row in rows}) == 4  # the same 4, over and over
    assert "drift gate PASS" in out and "window 3 (3-4 s): server_avg" in out
    assert (folder / "soak.png").stat().st_size > 10_000


def test_ctrl_c_keeps_the_windows_measured_so_far(fake_env: dict[str, str], tmp_path: Path
                                                  ) -> None:
    """SIGINT once the double hangs mid-soak: exit 130, the server tree gone, the soak's
    record written from the rows its run kept, status error."""
    events = tmp_path / "events"
    results = tmp_path / "results"
    double.interrupt_harness(
        ["soak", str(_suite(tmp_path)), "--duration", "60s", "--window", "10s", "--results",
         str(results), "--no-progress", "--no-plot"], events,
        {"FAKE_SGLANG_MODE": "hang_mid", "FAKE_SGLANG_CRASH_AFTER": "30",
         "FAKE_SGLANG_DELAY_S": "0.02"},
        requests=31, never="the soak never reached the hang", settle_s=0.5)  # warm-up + 30
    record = read_soak(_soak_folder(results))
    assert record.status == "error" and record.reasons[0].startswith("interrupted")
    assert record.drift is None and len(record.windows) == 6
    rows = read_requests(results / str(record.run_dir))
    assert len(rows) >= 20  # what finished before the hang (less the warm-up)
    assert sum(w.n_requests for w in record.windows) == len(rows)
    assert record.windows[0].accept_length is not None
    run = read_run(results / str(record.run_dir))
    assert run.verdict is not None and run.verdict.status == "error"


def test_a_server_that_dies_mid_soak_is_named(fake_env: dict[str, str], tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    double.crash_after(monkeypatch, 20)
    monkeypatch.setenv("FAKE_SGLANG_DELAY_S", "0.02")
    results = tmp_path / "results"
    code = main(["soak", str(_suite(tmp_path)), "--duration", "30s", "--window", "5s",
                 "--results", str(results), "--no-progress", "--no-plot"])
    out = capsys.readouterr().out
    assert code == 3, out
    record = read_soak(_soak_folder(results))
    assert record.status == "error" and any("server exited" in r for r in record.reasons)
    assert record.drift is not None and record.drift.status == "error"  # never a pass
    rows = read_requests(results / str(record.run_dir))
    assert rows and sum(w.n_requests for w in record.windows) == len(rows)
    assert "soak: ERROR" in out
