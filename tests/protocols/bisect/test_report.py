"""The result of a session from its journal entries: text, result.json fields, PNG.
No engine: the entries are written as a session would write them."""

from __future__ import annotations

from pathlib import Path

from harness.metrics.stats import wald
from harness.protocols.bisect import report
from harness.protocols.bisect.driver import SessionOutcome, describe_entry
from harness.protocols.bisect.session import Session


def session(tmp_path: Path, n: int = 8) -> Session:
    commits = [{"sha": f"{i:02d}" + "a" * 38, "subject": f"change {i}",
                "author_date": f"2026-01-{i + 1:02d}T00:00:00+00:00"} for i in range(n)]
    made = Session(session="s1", suite="suites/tiny_dflash_cpu.toml", suite_sha256="x",
                   good="reference:/r@v1", bad="reference:/r@v2", kind="reference-repo",
                   repo="/r", location="/r", fragment="", good_sha="f" * 40,
                   bad_sha=commits[-1]["sha"], commits=commits, first_parent=True, paths=[],
                   bad_added=False, metric="server_avg", alpha=0.01, wave=20, prompts=40,
                   max_prompts=80, results=str(tmp_path), started_at="now")
    made.folder.mkdir(parents=True)
    return made


def entry(role: str, index: int | None, verdict: str, value: float, requests: int,
          difference: float | None = None) -> dict:
    stat = {} if difference is None else {"difference": difference, "se": 0.1,
                                          "llr": -5.0 if verdict == "good" else 5.0,
                                          "threshold": 4.6}
    return {"role": role, "index": index, "commit": "", "verdict": verdict,
            "accept_length": value, "ci": [value - 0.2, value + 0.2], "requests": requests,
            "run_dir": None, "stat": stat}


def outcome(tmp_path: Path, steps: list[tuple[int, str]]) -> SessionOutcome:
    s = session(tmp_path)
    entries = {"good": entry("good", None, "reference", 3.4, 40),
               "bad": entry("bad", 7, "differs", 2.4, 40, -1.0)}
    result = SessionOutcome(s, entries, endpoint=wald(-1.0, 0.1, 0.99), differ=True)
    for k, (index, verdict) in enumerate(steps, start=1):
        role = f"step-{k:02d}"
        value = {"good": 3.4, "bad": 2.4}.get(verdict, 2.9)
        entries[role] = entry(role, index, verdict, value, 20 if verdict != "skip" else 0,
                              None if verdict == "skip" else value - 3.4)
        result.outcomes[index], result.final[index] = verdict, role  # type: ignore[assignment]
        result.order.append(index)
    return result


def test_found(tmp_path: Path) -> None:
    done = outcome(tmp_path, [(3, "good"), (5, "bad"), (4, "bad")])
    result = report.summarise(done)
    assert result["status"] == "found" and result["first_bad"]["sha"].startswith("04")
    assert (result["steps"], result["max_steps"], result["runs"], result["requests"]) == (
        3, 3, 5, 140)
    text = "\n".join(report.render(result))
    assert "first bad commit  04" in text and "change 4" in text
    assert "authored 2026-01-05" in text
    assert "before  3.400 (95% CI 3.200-3.600) on 20 prompts" in text
    assert "after   2.400" in text and "after - GOOD, paired on the same prompts: -1.000" in text
    assert "cost    3 steps (log2 bound 3), 5 runs, 140 requests" in text
    path = report.plot(done, result)
    assert path is not None and path.stat().st_size > 10_000
    assert report.write(done, result).is_file()


def test_skipped_and_undecided_commits_leave_a_range(tmp_path: Path) -> None:
    done = outcome(tmp_path, [(3, "good"), (5, "skip"), (4, "undecided"), (6, "bad")])
    result = report.summarise(done)
    assert result["status"] == "range"
    assert [c["subject"] for c in result["candidates"]] == ["change 4", "change 5", "change 6"]
    text = "\n".join(report.render(result))
    assert "the first bad commit is one of these" in text
    assert "2 skipped or undecided" in text
    assert report.plot(done, result) is not None


def test_no_difference(tmp_path: Path) -> None:
    done = outcome(tmp_path, [])
    done.differ, done.endpoint = False, wald(-0.01, 0.1, 0.99)
    result = report.summarise(done)
    assert result["status"] == "no difference" and result["steps"] == 0
    assert "do not differ significantly at alpha 0.01" in "\n".join(report.render(result))


def test_step_line() -> None:
    line = describe_entry(entry("step-01", 3, "good", 3.4, 20, 0.0))
    assert line == ("accept length 3.400 (95% CI 3.20-3.60) on 20 prompts, vs GOOD +0.000 "
                    "(se 0.100, log LR -5.0, bounds ±4.6) -> GOOD")
    assert describe_entry({"verdict": "skip", "reason": "no config"}) == "skip: no config"
