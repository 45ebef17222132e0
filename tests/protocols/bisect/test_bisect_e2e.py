"""`harness bisect` end to end on CPU: the reference engine "built" from each commit of a
git history of reference-build.toml, the tiny suite, real servers, real records.

Cost (2 cores): each measurement is one reference-engine launch (5-20 s, depending on
what else runs) plus its requests (~0.1 s each at concurrency 4). The 16-commit bisect
makes 6 launches (GOOD, BAD, 4 steps) and 160 requests; the no-difference history 2
launches and 40 requests; the interrupted session 4 launches and about 80 requests.
Measured: 124 s for the three on a quiet machine, 290 s with other jobs running.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from harness.builds import has_reference_dependencies
from harness.results.record import RunRecord
from harness.suite.model import SUITES_DIR
from tests.protocols.bisect.history import make_history

pytestmark = [pytest.mark.slow, pytest.mark.e2e]  # nox -s e2e
TINY = SUITES_DIR / "tiny_dflash_cpu.toml"
# 40 prompts a step (looks at 20 and 40), extended to 80 when undecided.
SMALL = ("--prompts", "20", "--max-prompts", "40", "--wave", "20")


@pytest.fixture(autouse=True)
def _reference_engine() -> None:
    if not has_reference_dependencies(sys.executable):
        pytest.skip("this environment lacks the reference extra (pip install -e '.[reference]')")


def bisect(*args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness", "bisect", *args],
                          capture_output=True, text=True, timeout=timeout)


def session_folder(results: Path) -> Path:
    folders = list((results / "bisect").glob("*/session.json"))
    assert len(folders) == 1, folders
    return folders[0].parent


def journal(folder: Path) -> list[dict]:
    path = folder / "steps.jsonl"
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_bisect_finds_the_commit_that_raised_the_draft_noise(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    commits, change = 8, 6  # the README's demo does 16 commits with the suite's prompts
    repo, shas = make_history(tmp_path / "engine", commits=commits, change_at=change)
    results = tmp_path / "results"
    started = time.monotonic()
    done = bisect(str(TINY), "--good", f"reference:{repo}@{shas[0]}", "--bad",
                  f"reference:{repo}@main", "--results", str(results), *SMALL)
    elapsed = time.monotonic() - started
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"first bad commit  {shas[change]}" in done.stdout
    assert f"engine change {change}: draft noise 0.25" in done.stdout
    folder = session_folder(results)
    result = json.loads((folder / "result.json").read_text())
    bound = math.ceil(math.log2(commits)) + 1
    with capsys.disabled():
        print(f"\nbisect of {commits} commits: {result['steps']} steps (bound {bound}), "
              f"{result['runs']} runs, {result['requests']} requests, {elapsed:.0f} s")
    assert result["status"] == "found" and result["first_bad"]["sha"] == shas[change]
    assert result["steps"] <= bound
    assert result["first_bad"]["author_date"] and result["first_bad"]["subject"]
    before, after = result["before"], result["after"]
    assert before["accept_length"] > after["accept_length"]  # noise lowers it
    assert before["ci"] and after["ci"]
    # every measurement is a normal run record: labelled, with its commit and verdict
    entries = journal(folder)
    assert [e["role"] for e in entries][:2] == ["good", "bad"]
    assert result["requests"] == sum(e["requests"] for e in entries)
    for entry in entries:
        record = RunRecord.model_validate_json((Path(entry["run_dir"]) / "run.json").read_text())
        assert record.label == f"bisect-{result['session']}-{entry['role']}"
        assert record.build.git_sha == entry["commit"]
        sequential = record.measurement.sequential
        assert sequential["rule"] == "bisect" and sequential["commit"] == entry["commit"]
        assert sequential["settled"] == entry["verdict"]
        assert record.measurement.n_requests == entry["requests"]
    steps = [e for e in entries if e["role"].startswith("step")]
    assert {e["verdict"] for e in steps} <= {"good", "bad"}
    for entry in steps:  # each step's verdict is the truth of its commit
        index = shas.index(entry["commit"])
        assert entry["verdict"] == ("bad" if index >= change else "good")
    assert (folder / "bisect.png").stat().st_size > 10_000


def test_endpoints_that_do_not_differ_end_with_exit_6(tmp_path: Path) -> None:
    repo, shas = make_history(tmp_path / "engine", commits=16, change_at=None)
    results = tmp_path / "results"
    done = bisect(str(TINY), "--good", f"reference:{repo}@{shas[0]}", "--bad",
                  f"reference:{repo}@main", "--results", str(results), "--prompts", "20",
                  "--max-prompts", "20", "--wave", "20")
    assert done.returncode == 6, done.stdout + done.stderr
    assert "GOOD and BAD do not differ significantly" in done.stdout
    assert "nothing to bisect" in done.stdout
    folder = session_folder(results)
    assert [e["role"] for e in journal(folder)] == ["good", "bad"]  # no step was run
    assert json.loads((folder / "result.json").read_text())["status"] == "no difference"


def _server_of(harness: psutil.Process) -> psutil.Process | None:
    for child in harness.children(recursive=True):
        try:
            if "reference_engine" in " ".join(child.cmdline()):
                return child
        except psutil.NoSuchProcess:
            continue
    return None


def test_ctrl_c_leaves_no_server_and_resume_finishes(tmp_path: Path) -> None:
    repo, shas = make_history(tmp_path / "engine", commits=2, change_at=1)
    results = tmp_path / "results"
    process = subprocess.Popen(
        [sys.executable, "-m", "harness", "bisect", str(TINY), "--good",
         f"reference:{repo}@{shas[0]}", "--bad", f"reference:{repo}@main", "--results",
         str(results), "--prompts", "20", "--max-prompts", "40", "--wave", "20"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    harness = psutil.Process(process.pid)
    deadline = time.monotonic() + 600
    server = None
    try:
        while time.monotonic() < deadline and process.poll() is None:
            folders = list((results / "bisect").glob("*"))
            if folders and len(journal(folders[0])) == 2:  # GOOD and BAD done
                server = _server_of(harness)
                if server is not None:
                    break
            time.sleep(0.2)
        assert server is not None, "the first step's server never started"
        family = [harness, *harness.children(recursive=True)]
        os.killpg(process.pid, signal.SIGINT)  # Ctrl-C reaches the whole foreground group
        out, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130, out + err
    assert "--resume" in err and "session" in err
    time.sleep(0.5)
    assert [p.pid for p in family if p.is_running() and p.status() != psutil.STATUS_ZOMBIE] == []
    folder = session_folder(results)
    assert [e["role"] for e in journal(folder)] == ["good", "bad"]

    resumed = bisect("--resume", "--results", str(results))
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert f"first bad commit  {shas[1]}" in resumed.stdout
    assert "GOOD  " in resumed.stderr and "from the journal" in resumed.stderr
    roles = [e["role"] for e in journal(folder)]
    assert roles[:2] == ["good", "bad"] and roles.count("good") == 1  # not measured again
    assert roles == ["good", "bad", "step-01"]  # the interrupted step measured again
