"""Pairing two sides: on the questions both asked (and how many), never across different
data or protocols (issue 19, case 6)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from harness.analysis.compare import compare, render, resolve_side
from harness.cli import main
from harness.results.layout import REQUESTS_FILE, RUN_FILE
from tests.results.records import make_run

WORKLOAD = {"kind": "gsm8k", "protocol": "completion", "data_sha256": "a" * 64,
            "temperature": 0.0}


def _with_workload(run_dir: Path, **change: object) -> Path:
    record = json.loads((run_dir / RUN_FILE).read_text())
    record["workload"] = dict(WORKLOAD, **change)
    (run_dir / RUN_FILE).write_text(json.dumps(record))
    return run_dir


def _prefix(run_dir: Path, n: int, into: Path) -> Path:
    """The same run stopped after its first `n` requests (a sequential run of one build)."""
    shutil.copytree(run_dir, into)
    lines = (into / REQUESTS_FILE).read_text().splitlines()[:n]
    (into / REQUESTS_FILE).write_text("\n".join(lines) + "\n")
    record = json.loads((into / RUN_FILE).read_text())
    record["run_id"] = "prefix" + record["run_id"][:2]
    (into / RUN_FILE).write_text(json.dumps(record))
    return into


def test_a_sequential_prefix_pairs_on_the_shared_questions(results: Path, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]
                                                           ) -> None:
    """50 questions of a build against 480 of the same build: paired on the 50, the
    difference exactly 0, so --fail-on-drop passes (it exited 1 as independent samples)."""
    full = _with_workload(make_run(results, 2.5, n=480, seed=3))
    prefix = _prefix(full, 50, tmp_path / "prefix")
    result = compare(resolve_side(str(prefix), results), resolve_side(str(full), results))
    assert result["pairing"] == {"paired": True, "shared_questions": 50, "n_a": 50,
                                 "n_b": 480, "description":
                                 "paired on 50 shared questions (A asked 50, B 480)"}
    assert result["difference"]["b_minus_a"] == pytest.approx(0.0, abs=1e-12)
    assert "paired by question" in result["difference"]["method"]
    assert "on the 50 questions both sides asked" in result["difference"]["method"]
    assert result["warnings"] == []
    assert all(c["n_shared"] == 50 and c["b_minus_a"] == pytest.approx(0.0, abs=1e-12)
               for c in result["categories"].values())
    assert main(["compare", str(prefix), str(full), "--fail-on-drop"]) == 0
    assert "pairing: paired on 50 shared questions (A asked 50, B 480)" in \
        capsys.readouterr().out


@pytest.mark.parametrize("change", [{"data_sha256": "b" * 64}, {"protocol": "chat"},
                                    {"temperature": 0.6}])
def test_different_data_or_protocol_is_never_paired_and_says_so(
        results: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        change: dict[str, object]) -> None:
    """Question i of another data set (or sent another way) is not question i: no pairing
    row by row, and a loud warning naming the field."""
    a = _with_workload(make_run(results, 2.5, n=60, seed=1))
    b = _with_workload(make_run(results, 2.5, n=60, seed=2), **change)
    result = compare(resolve_side(str(a), results), resolve_side(str(b), results))
    field = next(iter(change))
    assert not result["pairing"]["paired"]
    assert result["pairing"]["shared_questions"] == 60
    assert result["difference"]["method"].startswith("independent samples")
    assert any(w.startswith(f"{field} differs") for w in result["warnings"])
    assert all(c["method"].startswith("independent") for c in result["categories"].values())
    render(result)
    out = capsys.readouterr().out
    assert f"WARNING: {field} differs" in out
    assert "compared as independent samples, not paired" in out


def test_different_prompt_tokens_for_a_shared_question_are_not_paired(
        results: Path, tmp_path: Path) -> None:
    a = _with_workload(make_run(results, 2.5, n=30, seed=1))
    b = _with_workload(make_run(results, 2.5, n=30, seed=2))
    for run_dir, digest in ((a, "1"), (b, "2")):
        rows = [json.loads(line) for line in (run_dir / REQUESTS_FILE).read_text().splitlines()]
        rows[0]["prompt_sha256"] = digest * 64
        (run_dir / REQUESTS_FILE).write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = compare(resolve_side(str(a), results), resolve_side(str(b), results))
    assert not result["pairing"]["paired"]
    assert "1 of the 30 shared questions were sent as different prompt tokens" in \
        result["warnings"]
