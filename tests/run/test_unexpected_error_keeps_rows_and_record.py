"""An error the harness did not expect, raised after every request was measured (inside
the judge: a library missing, a defect of ours), loses nothing: the request rows stay,
run.json is written with verdict ERROR naming the error, the command says so in one line
and exits 3, with no traceback. A real `harness run` of the tiny reference suite in a
subprocess, its judge made to raise."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from harness.builds import has_reference_dependencies
from tests.tiny_variants import tiny_variant

ROOT = Path(__file__).resolve().parents[2]
QUESTIONS = 4

# the judge raises as a missing scipy would, after the measurement
BROKEN_JUDGE = textwrap.dedent("""
    import sys
    from harness.run import measuring

    def judge_entry(*args, **kwargs):
        raise ModuleNotFoundError("No module named 'scipy'", name="scipy")

    measuring.judge_entry = judge_entry
    from harness.cli import main
    sys.exit(main(sys.argv[1:]))
""")


@pytest.mark.slow
@pytest.mark.skipif(not has_reference_dependencies(sys.executable),
                    reason="this environment lacks the reference extra")
def test_an_error_in_the_judge_keeps_the_rows_and_records_the_error(tmp_path: Path) -> None:
    suite = tmp_path / "tiny_judge.toml"
    suite.write_text(tiny_variant("tiny_judge", floor=1.5, questions=QUESTIONS))
    results = tmp_path / "results"
    done = subprocess.run(
        [sys.executable, "-c", BROKEN_JUDGE, "run", str(suite), "--results", str(results),
         "--no-progress", "--no-plot"],
        capture_output=True, text=True, timeout=900, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)})
    output = done.stdout + done.stderr
    assert done.returncode == 3, output
    assert "Traceback" not in output, output
    assert "unexpected ModuleNotFoundError: No module named 'scipy'" in done.stdout, output
    (folder,) = [p for p in (results / "runs" / "tiny_judge").iterdir() if p.is_dir()]
    record = json.loads((folder / "run.json").read_text())
    assert record["verdict"]["status"] == "error"
    assert any("ModuleNotFoundError" in reason for reason in record["verdict"]["reasons"])
    rows = (folder / "requests.jsonl").read_text().splitlines()
    assert len(rows) == QUESTIONS and record["measurement"]["n_requests"] == QUESTIONS
