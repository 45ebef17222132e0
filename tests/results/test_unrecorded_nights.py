"""A harness killed before it wrote run.json leaves a run folder with request rows and a
server log but no record; a damaged (truncated) run.json is as good as none. Either one,
newer than the latest record, is the night's run: an error in every report (`paired`,
`trend`, the published site's latest status), named, never the night before's pass."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest

from harness.cli import main
from harness.publish.model import gather
from harness.results.layout import REQUESTS_FILE, RUN_FILE
from tests.publish.history import START, night

SERIES = "suite_a"


def killed(results: Path, day: int) -> Path:
    """A run folder as a harness killed in its measurement leaves it."""
    started = START + timedelta(days=day, minutes=1)
    folder = results / "runs" / SERIES / f"{started:%Y%m%dT%H%M%SZ}-deadbee{day}"
    folder.mkdir(parents=True)
    (folder / REQUESTS_FILE).write_text(json.dumps({"index": 0, "question_index": 0}) + "\n")
    (folder / "server.log").write_text("serving\n")
    return folder


def truncated(results: Path, day: int) -> Path:
    folder = night(results, day=day, accept=2.6, paired_with="ref00001")
    text = (folder / RUN_FILE).read_text()
    (folder / RUN_FILE).write_text(text[: len(text) // 2])
    return folder


def history(results: Path, latest: Callable[[Path, int], Path]) -> Path:
    for day in (0, 1):
        night(results, day=day, accept=2.6, paired_with="ref00001")
    return latest(results, 2)


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    capsys.readouterr()
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out + captured.err


@pytest.mark.parametrize("latest", [killed, truncated], ids=["killed", "truncated"])
def test_paired_and_trend_call_the_night_an_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        latest: Callable[[Path, int], Path]) -> None:
    folder = history(tmp_path, latest)
    for argv in (["paired", SERIES], ["paired"], ["paired", SERIES, "--label", "main"],
                 ["trend", SERIES], ["trend"], ["trend", "--markdown"]):
        code, text = run([*argv, "--results", str(tmp_path)], capsys)
        assert code == 3, (argv, text)
        assert folder.name in text, (argv, text)
    code, text = run(["paired", "--json", "--results", str(tmp_path)], capsys)
    (row,) = json.loads(text[: text.rindex("]") + 1])
    assert row["status"] == "error" and folder.name in row["reason"]
    code, text = run(["trend", "--json", "--results", str(tmp_path)], capsys)
    (summary,) = json.loads(text[: text.rindex("]") + 1])
    assert summary["verdict"] == "error" and folder.name in summary["unrecorded"]


@pytest.mark.parametrize("latest", [killed, truncated], ids=["killed", "truncated"])
def test_the_published_line_shows_the_error(tmp_path: Path,
                                            latest: Callable[[Path, int], Path]) -> None:
    folder = history(tmp_path, latest)
    (series,) = gather(tmp_path).series
    (line,) = series.lines
    assert line.status == "error" and folder.name in str(line.unrecorded)


def test_an_unrecorded_folder_before_the_latest_record_is_history(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    killed(tmp_path, 0)
    for day in (1, 2):
        night(tmp_path, day=day, accept=2.6, paired_with="ref00001")
    for argv in (["paired", SERIES], ["trend", SERIES]):
        code, text = run([*argv, "--results", str(tmp_path)], capsys)
        assert code == 0, (argv, text)
    (series,) = gather(tmp_path).series
    assert series.lines[0].status == "pass" and series.lines[0].unrecorded is None
