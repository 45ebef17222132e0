"""A library call in a fresh interpreter (a notebook, a script) works without the CLI:
`load_suite`, and what notebooks/ calls (the loader, the redactor, the paired report, a
comparison, a plot). harness.secrets sits below the engines and never imports them; it
reads the engines' secret flags from the table below every folder (harness/engine_kinds.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.results.records import make_run

ROOT = Path(__file__).resolve().parents[2]


def fresh(code: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """`code` in a new interpreter that has imported nothing of the harness."""
    env = {**os.environ, "MPLBACKEND": "Agg", "HARNESS_RESULTS": str(tmp_path / "results")}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)


def test_load_suite_works_in_a_fresh_interpreter(tmp_path: Path) -> None:
    done = fresh("""
        import sys
        from harness.suite.model import load_suite
        loaded = load_suite("tiny_dflash_cpu")
        print(loaded.suite.name, "harness.cli" in sys.modules)
    """, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["tiny_dflash_cpu", "False"]  # not through the CLI


def test_what_the_notebook_calls_works_in_a_fresh_interpreter(tmp_path: Path) -> None:
    for label, accept in (("pre-fix", 2.4), ("post-fix", 2.6)):
        make_run(tmp_path / "results", accept_length=accept, n=12, label=label)
    done = fresh("""
        import os
        from pathlib import Path
        from harness.analysis import paired_report, plots
        from harness.analysis.compare import Side, add_run, compare
        from harness.results import store
        from harness.secrets import redact_argv, redact_text
        results = Path(os.environ["HARNESS_RESULTS"])
        runs = store.load_runs(results)
        print(redact_text("git+https://user:hunter2secret@host/repo"))
        print(" ".join(redact_argv(["serve", "--api-key", "hunter2secret"])))
        sides = []
        for label in ("pre-fix", "post-fix"):
            side = Side(name=label)
            for path in runs.loc[runs["label"] == label, "path"]:
                add_run(side, Path(path))
            sides.append(side)
        print(round(compare(*sides)["difference"]["b_minus_a"], 1))
        print(paired_report.rows(paired_report.latest_paired(results))[0]["status"])
        print(plots.plot_run(Path(runs["path"].iloc[-1])).suffix)
    """, tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "hunter2secret" not in done.stdout and "<redacted>" in lines[0], lines
    assert lines[1] == "serve --api-key <redacted>"
    assert lines[3] == "not paired" and lines[4] == ".png", lines
