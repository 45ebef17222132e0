"""Issue 50, item 3: staleness is visible. A night killed before its run folder existed
leaves no trace, so `trend` and `paired` print each series' latest night with its time
and age, `--max-age` makes a series whose latest night is older an error (exit 3), and
`paired --since` over a window with no run exits 3, as `trend --since` does."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from harness.analysis.staleness import age_text, parse_age
from harness.cli import main
from harness.errors import BadInput, ExitCode
from tests.analysis.test_paired_report import paired_record, write
from tests.results.records import make_run

NOW = datetime.now(UTC)


def nights(results: Path, last_age: timedelta, count: int = 3) -> None:
    """`count` nights a day apart, the latest `last_age` ago."""
    for i in range(count):
        make_run(results, 2.5, seed=i, label="nightly",
                 started_at=NOW - last_age - timedelta(days=count - 1 - i))


def trend(results: Path, capsys: pytest.CaptureFixture[str], *extra: str
          ) -> tuple[int, dict]:
    code = main(["trend", "--results", str(results), "--json", *extra])
    [summary] = json.loads(capsys.readouterr().out)
    return code, summary


def test_trend_prints_the_latest_night_with_its_age(
        results: Path, capsys: pytest.CaptureFixture[str]) -> None:
    nights(results, timedelta(days=3, hours=2))
    code, summary = trend(results, capsys)
    assert code == ExitCode.PASS and summary["overdue"] is None
    assert summary["latest_night"].endswith("(3d 2h ago)")
    assert main(["trend", "--results", str(results), "--markdown"]) == ExitCode.PASS
    assert "(3d 2h ago)" in capsys.readouterr().out
    assert main(["trend", "--results", str(results)]) == ExitCode.PASS
    assert "3d 2h ago" in capsys.readouterr().out


def test_trend_max_age_turns_an_old_latest_night_into_an_error(
        results: Path, capsys: pytest.CaptureFixture[str]) -> None:
    nights(results, timedelta(days=3))
    code, summary = trend(results, capsys, "--max-age", "26h")
    assert code == ExitCode.ENGINE_ERROR
    assert "older than --max-age 1d 2h" in summary["overdue"]
    code, summary = trend(results, capsys, "--max-age", "4d")
    assert code == ExitCode.PASS and summary["overdue"] is None
    assert main(["trend", "--results", str(results), "--max-age", "26h"]) == \
        ExitCode.ENGINE_ERROR
    assert "stale: latest night" in capsys.readouterr().out


def test_a_bad_max_age_is_bad_input(results: Path) -> None:
    nights(results, timedelta(hours=1))
    for text in ("soon", "-3h", "0h", "3 weeks"):
        assert main(["trend", "--results", str(results), f"--max-age={text}"]) == \
            ExitCode.BAD_INPUT
        assert main(["paired", "--results", str(results), f"--max-age={text}"]) == \
            ExitCode.BAD_INPUT
    with pytest.raises(BadInput, match="26h"):
        parse_age("tomorrow")
    assert parse_age("90m") == timedelta(minutes=90) and age_text(timedelta(minutes=5)) == "5m"


def test_paired_prints_the_latest_night_and_max_age_makes_it_an_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    started = (NOW - timedelta(days=2, hours=5)).isoformat()
    write(tmp_path, "g", "20260101T000000Z-a", paired_record("a", started, "pass"))
    assert main(["paired", "g", "--results", str(tmp_path), "--json"]) == ExitCode.PASS
    [row] = json.loads(capsys.readouterr().out)
    assert row["latest_night"].endswith("(2d 5h ago)") and "stale" not in row
    assert main(["paired", "g", "--results", str(tmp_path), "--markdown"]) == ExitCode.PASS
    assert "(2d 5h ago)" in capsys.readouterr().out
    assert main(["paired", "g", "--results", str(tmp_path), "--json", "--max-age", "1d"]) \
        == ExitCode.ENGINE_ERROR
    [row] = json.loads(capsys.readouterr().out)
    assert row["status"] == "error" and "older than --max-age 1d 0h" in row["stale"]


def test_paired_since_over_a_window_with_no_run_exits_3(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(tmp_path, "g", "20260101T000000Z-a",
          paired_record("a", "2026-01-01T00:00:00+00:00", "pass"))
    code = main(["paired", "--results", str(tmp_path), "--since", "2026-01-02T00:00:00Z"])
    assert code == ExitCode.ENGINE_ERROR
    assert "no run started since 2026-01-02" in capsys.readouterr().err
    # trend --since does the same over the same window
    assert main(["paired", "--results", str(tmp_path), "--since",
                 "2026-01-01T00:00:00Z"]) == ExitCode.PASS
