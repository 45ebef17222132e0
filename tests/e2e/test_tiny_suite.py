"""The embedded default end to end: `harness run tiny_dflash_cpu` on the CPU reference engine.

Every stage runs for real (checkpoints built or taken from the cache, a server process,
HTTP, GSM8K prompts, exact accept length, verdict, record, plot), then the analysis
commands and the regression notebook run on the records this test produced. The runs
happen once per test session, whichever xdist worker gets there first.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest
from filelock import FileLock

from harness.builds import has_reference_dependencies
from harness.results.record import RunRecord
from harness.suite.model import SUITES_DIR

pytestmark = [pytest.mark.slow, pytest.mark.e2e]  # nox -s e2e

TINY = SUITES_DIR / "tiny_dflash_cpu.toml"
NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "compare_regressions.ipynb"


def harness_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True,
                          text=True, env={**os.environ, **(env or {})}, timeout=1800)


def noisy_suite(folder: Path, noise: float) -> Path:
    """The tiny suite with its draft degraded by a known amount (the engine's knob)."""
    text = TINY.read_text()
    document = tomllib.loads(text)
    assert "draft_noise" not in document["engine"], "the shipped suite must not set noise"
    path = folder / f"tiny_noise_{noise:g}.toml".replace(".", "_", 1)
    path.write_text(text.replace('kind = "reference"',
                                 f'kind = "reference"\ndraft_noise = {noise}', 1))
    return path


@pytest.fixture(scope="session")
def tiny_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """The tiny suite, clean and at each noise setting: run once for all xdist workers.

    The first worker to get the lock runs them and leaves the outcomes in a file; the
    others read it (pytest-xdist's recipe for a session fixture shared by workers).
    """
    if not has_reference_dependencies(sys.executable):
        pytest.skip("this environment lacks the reference extra (pip install -e '.[reference]')")
    from tests.shared import session_shared_dir

    # this session's workers only (the basetemp's parent is every session's without xdist)
    shared = session_shared_dir(tmp_path_factory, "tiny_runs")
    outcomes_file = shared / "outcomes.json"
    with FileLock(str(shared / ".lock")):
        if not outcomes_file.exists():
            outcomes_file.write_text(json.dumps(run_tiny_suites(shared)))
    outcomes = json.loads(outcomes_file.read_text())
    return {"results": Path(outcomes["results"]), "clean": Outcome(*outcomes["clean"]),
            "noisy": {float(k): Outcome(*v) for k, v in outcomes["noisy"].items()}}


@dataclass(frozen=True)
class Outcome:
    returncode: int
    stdout: str
    stderr: str


def run_tiny_suites(folder: Path) -> dict[str, object]:
    results = folder / "results"
    clean = harness_cli("run", str(TINY), "--results", str(results), "--label", "reference",
                        "--no-progress")
    noisy = {noise: harness_cli("run", str(noisy_suite(folder, noise)), "--results",
                                str(results), "--label", f"noise-{noise:g}", "--no-progress")
             for noise in NOISE_SETTINGS}

    def keep(done: subprocess.CompletedProcess) -> list[object]:
        return [done.returncode, done.stdout, done.stderr]

    return {"results": str(results), "clean": keep(clean),
            "noisy": {str(noise): keep(done) for noise, done in noisy.items()}}


# Known-size degradations of the draft: 0.1 crosses the tiny suite's floor, 0.25 by far.
NOISE_SETTINGS = (0.1, 0.25)


def records(results: Path) -> dict[str, RunRecord]:
    found = {}
    for file in results.glob("runs/*/*/run.json"):
        record = RunRecord.model_validate_json(file.read_text())
        found[record.label or ""] = record
    return found




def test_tiny_suite_passes_with_a_full_record(tiny_runs: dict) -> None:
    clean = tiny_runs["clean"]
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert "verdict: PASS" in clean.stdout
    record = records(tiny_runs["results"])["reference"]
    run_dir = Path(next(tiny_runs["results"].glob(f"runs/*/*-{record.run_id}")))
    rows = [json.loads(line) for line in (run_dir / "requests.jsonl").read_text().splitlines()]
    suite = tomllib.loads(TINY.read_text())
    assert len(rows) == suite["workload"]["questions"]
    measurement = record.measurement
    assert measurement is not None and measurement.accept_length_ci is not None
    low, high = measurement.accept_length_ci
    assert low <= measurement.accept_length <= high
    assert measurement.accept_length >= 1.5
    assert len({round(r["spec_accept_length"], 6) for r in rows}) > 1, "per-prompt values vary"
    assert (run_dir / "accept_length.png").stat().st_size > 10_000
    assert (run_dir / "server.log").stat().st_size > 0
    # the applied attention table: fixed policy on a draft that never declares is_causal
    assert record.attention is not None
    assert [layer.causal for layer in record.attention] == [True, True, True, True, False]
    assert record.build.engine == "reference"
    assert record.build.options["attention_policy"] == "fixed"


def test_knob_lowers_accept_length_monotonically_and_flips_the_verdict(tiny_runs: dict) -> None:
    found = records(tiny_runs["results"])
    labels = ["reference", *(f"noise-{noise:g}" for noise in NOISE_SETTINGS)]
    figures = [found[label].measurement.accept_length for label in labels]
    assert figures == sorted(figures, reverse=True) and len(set(figures)) == len(figures)
    floor = tomllib.loads(TINY.read_text())["floors"]["accept_length"]
    for label, figure in zip(labels, figures, strict=True):
        expected = "pass" if figure >= floor else "fail"
        assert found[label].verdict.status == expected
    assert [found[label].verdict.status for label in labels] == ["pass", "fail", "fail"]
    for noise, outcome in tiny_runs["noisy"].items():
        assert outcome.returncode == 1, (noise, outcome.stdout + outcome.stderr)


def test_plot_and_compare_on_tiny_records(tiny_runs: dict) -> None:
    results = tiny_runs["results"]
    run_dirs = sorted(p.parent for p in results.glob("runs/*/*/run.json"))
    compare = harness_cli("compare", str(run_dirs[0]), str(run_dirs[1]), "--results",
                          str(results))
    assert compare.returncode == 0, compare.stdout + compare.stderr
    assert "accept length" in compare.stdout.lower()
    plot = harness_cli("plot", str(run_dirs[0]), "--results", str(results), "--kind",
                       "histogram")
    assert plot.returncode == 0, plot.stdout + plot.stderr


def test_regression_notebook_runs_on_tiny_records(tiny_runs: dict) -> None:
    nbformat = pytest.importorskip("nbformat", reason="the notebooks extra is not installed")
    from nbclient import NotebookClient

    notebook = nbformat.read(NOTEBOOK, as_version=4)
    env = {"HARNESS_RESULTS": str(tiny_runs["results"]), "HARNESS_LABEL_A": "noise-0.1",
           "HARNESS_LABEL_B": "reference", "MPLBACKEND": "Agg"}
    previous = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    try:
        NotebookClient(notebook, timeout=600, kernel_name="python3").execute()
    finally:
        for key, value in previous.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.outputs]
    assert not [o for o in outputs if o.get("output_type") == "error"]


def test_regressed_behaviour_is_stopped_by_the_contract(tiny_runs: dict, tmp_path: Path) -> None:
    """Replaying the regressed SGLang behaviour breaks the suite's expected_layers before launch."""
    suite = tmp_path / "tiny_regressed.toml"
    suite.write_text(TINY.read_text().replace('attention_policy = "fixed"',
                                              'attention_policy = "regressed"', 1))
    results = tmp_path / "results"
    outcome = harness_cli("run", str(suite), "--results", str(results), "--no-progress")
    assert outcome.returncode == 1, outcome.stdout + outcome.stderr
    for layer in range(4):
        assert f"layer {layer}: expected causal, got bidirectional" in outcome.stdout
    run_dir = next(results.glob("runs/*/*"))
    assert not (run_dir / "server.log").exists()


def test_ab_replays_pre_fix_against_post_fix(tmp_path: Path) -> None:
    """`harness ab` with the reference engine's builds: SGLang's regressed vs fixed behaviour."""
    if not has_reference_dependencies(sys.executable):
        pytest.skip("this environment lacks the reference extra (pip install -e '.[reference]')")
    results = tmp_path / "results"
    done = harness_cli("ab", str(TINY), "--a", "reference:policy=regressed",
                       "--b", "reference:policy=fixed", "--label-a", "pre-fix",
                       "--label-b", "post-fix", "--results", str(results), "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    comparison = json.loads(done.stdout[done.stdout.index("{"):])
    found = records(results)
    pre, post = found["pre-fix"], found["post-fix"]
    # the build under test is the build's, not the suite's: one history spans builds
    assert pre.build.options["attention_policy"] == "regressed"
    assert post.build.options["attention_policy"] == "fixed"
    assert pre.suite.document["engine"]["attention_policy"] == "fixed"  # the file's
    assert [layer.causal for layer in pre.attention] == [False] * 5
    assert any("contract differs (not enforced)" in r for r in pre.verdict.reasons)
    difference = post.measurement.accept_length - pre.measurement.accept_length
    assert comparison["difference"]["b_minus_a"] == pytest.approx(difference)
