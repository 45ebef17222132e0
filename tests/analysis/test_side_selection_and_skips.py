"""Commands on results folders: $HARNESS_RESULTS everywhere, skips reported once per
command, side selection that says what it took, and one accept-length definition per
comparison."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from harness.cli import main
from harness.results.layout import REQUESTS_FILE, RUN_FILE
from tests.results.records import make_history, make_run

SUITE = "tiny_dflash_cpu"
START = datetime(2025, 3, 1, tzinfo=UTC)


def _bad_and_errored(results: Path) -> dict[str, Path]:
    """A bad record of each issue-10 shape, and an errored run (no figure) as the latest."""
    folder = results / "runs" / SUITE
    good = json.loads(next(folder.glob(f"*/{RUN_FILE}")).read_text())
    made = {}
    for i, (name, change) in enumerate({
        "list": {"measurement": [1, 2, 3]},
        "verdict": {"verdict": "pass"},
        "time": {"started_at": "yesterday"},
        "errored": {"measurement": None, "run_id": "errored1",
                    "verdict": {"status": "error", "reasons": ["server exited"]},
                    "started_at": "2099-01-02T00:00:00Z"},
    }.items()):  # fmt: skip
        run_dir = folder / f"20990101T00000{i}Z-{name}"
        run_dir.mkdir()
        (run_dir / RUN_FILE).write_text(json.dumps(dict(good, **change)))
        made[name] = run_dir
    broken = results / "baselines" / f"{SUITE}--broken.json"
    broken.parent.mkdir(exist_ok=True)
    broken.write_text(json.dumps(dict(good, kind="baseline", label="broken", verdict=[])))
    made["baseline"] = broken
    return made


def _harness(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The real CLI in a subprocess: what a user sees on stderr (no logging configured)."""
    return subprocess.run([sys.executable, "-m", "harness", *argv], capture_output=True,
                          text=True, env=dict(os.environ, **(env or {})), timeout=300)  # fmt: skip


def test_each_skip_is_printed_once_per_command(results: Path) -> None:
    make_history(results, nights=4)
    bad = _bad_and_errored(results)
    for argv in (["compare", f"{SUITE}@previous", f"{SUITE}@latest", "--json"],
                 ["compare", str(results / "runs" / SUITE / "*"), f"{SUITE}@latest", "--json"],
                 ["plot", SUITE], ["trend"]):  # fmt: skip
        done = _harness(*argv, "--results", str(results))
        assert done.returncode in (0, 1, 3), (argv, done.stderr)  # trend: the latest errored
        assert "Traceback" not in done.stderr
        for name in ("list", "verdict", "time") + (("baseline",) if argv[0] != "compare" else ()):
            assert done.stderr.count(str(bad[name])) == 1, (argv, name, done.stderr)
        assert "measurement: expected an object, got a list" in done.stderr
        assert "started_at: not an ISO 8601 time: 'yesterday'" in done.stderr


def test_latest_and_previous_pass_over_runs_without_a_figure(
    results: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dirs = make_history(results, nights=4)
    _bad_and_errored(results)
    code = main(["compare", f"{SUITE}@previous", f"{SUITE}@latest", "--results", str(results),
                 "--json"])  # fmt: skip
    assert code == 0
    captured = capsys.readouterr()
    result = json.loads(captured.out)
    ids = [json.loads((d / RUN_FILE).read_text())["run_id"] for d in dirs]
    assert result["a"]["runs"] == [ids[-2]] and result["b"]["runs"] == [ids[-1]]
    assert f"{SUITE}@previous: run {ids[-2]} of 2025-01-03 00:00 UTC (pass" in captured.err
    assert f"{SUITE}@latest: run {ids[-1]} of 2025-01-04 00:00 UTC" in captured.err
    assert "1 run(s) errored, partial or without an accept length passed over" in captured.err


def test_latest_and_previous_pass_over_partial_and_errored_runs_unless_asked(
    results: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A night whose server died after 30 requests keeps a partial figure; an errored run
    may keep one too. Neither is SUITE@latest / @previous by default (issue 19, case 8)."""
    dirs = make_history(results, nights=3)
    ids = [json.loads((d / RUN_FILE).read_text())["run_id"] for d in dirs]
    crashed = []
    for day, change in ((10, {"partial": True, "n_planned": 100}), (11, {})):
        run_dir = make_run(results, 1.2, n=30, seed=day, label="nightly",
                           started_at=datetime(2025, 1, day, tzinfo=UTC))
        record = json.loads((run_dir / RUN_FILE).read_text())
        record["measurement"].update(change)
        record["verdict"] = {"status": "error", "reasons": ["server died: exit -9"]}
        (run_dir / RUN_FILE).write_text(json.dumps(record))
        crashed.append(record["run_id"])
    argv = ["compare", f"{SUITE}@previous", f"{SUITE}@latest", "--results", str(results),
            "--json", "--fail-on-drop"]
    assert main(argv) == 0
    captured = capsys.readouterr()
    result = json.loads(captured.out)
    assert result["a"]["runs"] == [ids[-2]] and result["b"]["runs"] == [ids[-1]]
    assert "2 run(s) errored, partial or without an accept length passed over" in captured.err
    assert main([*argv, "--include-incomplete"]) in (0, 1)  # the crashed nights, marked
    captured = capsys.readouterr()
    result = json.loads(captured.out)
    assert result["a"]["runs"] == [crashed[0]] and result["b"]["runs"] == [crashed[1]]
    assert f"run {crashed[0]} of 2025-01-10 00:00 UTC (error, " in captured.err
    assert "partial)" in captured.err


def test_a_glob_skips_bad_folders_and_says_so(
    results: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make_history(results, nights=3)
    bad = _bad_and_errored(results)
    pattern = str(results / "runs" / SUITE / "*")
    assert main(["compare", pattern, f"{SUITE}@latest", "--results", str(results),
                 "--json"]) == 0  # fmt: skip
    captured = capsys.readouterr()
    assert len(json.loads(captured.out)["a"]["runs"]) == 3
    assert "3 run(s); 3 unusable and 1 without an accept length passed over" in captured.err
    only_bad = str(results / "runs" / SUITE / "2099*")
    assert main(["compare", only_bad, f"{SUITE}@latest", "--results", str(results)]) == 2
    assert "none of the 4 run folders it matches has a usable accept length" in \
        capsys.readouterr().err  # fmt: skip
    # a bad folder named on its own is an error that names the file and the field
    assert main(["compare", str(bad["list"]), f"{SUITE}@latest", "--results", str(results)]) == 2
    err = capsys.readouterr().err
    assert f"{bad['list'] / RUN_FILE}: measurement: expected an object, got a list" in err


def test_harness_results_is_honoured_by_every_command(
    results: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    make_history(results, nights=3)
    make_run(results, 5.5, n=50, suite="gemma4_dflash_31b", floor=5.4)
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")  # no ./results here
    monkeypatch.setenv("HARNESS_RESULTS", str(results))
    assert main(["compare", f"{SUITE}@previous", f"{SUITE}@latest", "--json"]) == 0
    assert main(["plot", SUITE]) == 0
    assert (results / "plots" / SUITE / "history.png").is_file()
    assert main(["power", "gemma4_dflash_31b", "--json"]) == 0
    assert "pooled over 1 recorded run" in capsys.readouterr().out
    assert main(["trend", SUITE, "--json"]) == 0
    monkeypatch.delenv("HARNESS_RESULTS")
    assert main(["compare", f"{SUITE}@previous", f"{SUITE}@latest"]) == 2  # ./results is empty
    help_text = _harness("run", "--help").stdout
    assert "$HARNESS_RESULTS" in help_text


def _as_server_avg(run_dir: Path) -> None:
    """Give a synthetic run correct-draft counts per request and judge it in server_avg."""
    rows = [json.loads(line) for line in (run_dir / REQUESTS_FILE).read_text().splitlines()]
    for row in rows:  # tokens produced by verify steps, less one per step: the drafts
        row["correct_drafts"] = max(0, row["completion_tokens"] - 1 - row["verify_steps"])
    (run_dir / REQUESTS_FILE).write_text("".join(json.dumps(r) + "\n" for r in rows))
    data = json.loads((run_dir / RUN_FILE).read_text())
    steps = sum(r["verify_steps"] for r in rows)
    server = (sum(r["correct_drafts"] for r in rows) + steps) / steps
    data["measurement"].update(metric="server_avg", accept_length=server,
                               accept_length_server_avg=server)  # fmt: skip
    (run_dir / RUN_FILE).write_text(json.dumps(data))


def _baseline(results: Path, run_dir: Path, label: str, metric: str) -> Path:
    """A hand-entered figure in `metric` (no per-request data)."""
    record = json.loads((run_dir / RUN_FILE).read_text())
    record.update(kind="baseline", label=label, run_id=f"base-{label}", external=True,
                  started_at=None, verdict=None)  # fmt: skip
    record["measurement"] = {"metric": metric, "accept_length": 2.5}
    file = results / "baselines" / f"{SUITE}--{label}.json"
    file.parent.mkdir(exist_ok=True)
    file.write_text(json.dumps(record))
    return file


def test_compare_uses_one_definition_for_both_sides(
    results: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = make_run(results, 2.6, n=60, seed=1, started_at=START)
    b = make_run(results, 2.6, n=60, seed=2, started_at=START + timedelta(days=1))
    _as_server_avg(a)
    _as_server_avg(b)
    assert main(["compare", str(a), str(b), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["metric"] == "server_avg"
    rows = [json.loads(line) for line in (a / REQUESTS_FILE).read_text().splitlines()]
    steps = sum(r["verify_steps"] for r in rows)
    exact = (sum(r["correct_drafts"] for r in rows) + steps) / steps
    assert result["a"]["accept_length"] == pytest.approx(exact)
    assert result["difference"]["method"].startswith("paired")
    # a run judged per_request: compared in A's definition, its numerators by stats.numerator
    c = make_run(results, 2.6, n=60, seed=3, started_at=START + timedelta(days=2))
    assert main(["compare", str(c), str(a), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["metric"] == "per_request"
    tokens = sum(r["completion_tokens"] for r in rows)
    assert result["b"]["accept_length"] == pytest.approx(tokens / steps)
    # two figures in different definitions cannot be compared
    server = _baseline(results, a, "server", "server_avg")
    per_request = _baseline(results, a, "perreq", "per_request")
    assert main(["compare", str(server), str(per_request)]) == 2
    assert "not comparable" in capsys.readouterr().err
    assert main(["compare", str(server), str(b), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["metric"] == "server_avg"
    assert main(["compare", f"baseline:{SUITE}@perreq", str(c), "--results", str(results),
                 "--json"]) == 0  # fmt: skip
    assert json.loads(capsys.readouterr().out)["metric"] == "per_request"
