"""Both CPU suites, run by `harness run` against the real SGLang 0.5.23 server, to PASS.

What each run must show: the real build (0.5.23, its cache key, its dependency listing),
the kernel stand-in named by its sha256, the intel_amx backend kept, both accept-length
definitions from per-request meta_info, the server's own /server_info figure equal to
the harness's server_avg for the measured window (the suites set --decode-log-interval 1,
so SGLang folds its figure after every decode batch), and a plot.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from harness import builds
from harness.results.layout import RUN_PNG
from tests.sglang_cpu.conftest import REPO, SPEC, STAND_IN


def run_suite(suite: str, results: Path, env: dict[str, str], *extra: str
              ) -> tuple[subprocess.CompletedProcess[str], list[Path]]:
    done = subprocess.run(
        [sys.executable, "-m", "harness", "run", suite, "--sglang", SPEC, "--results",
         str(results), *extra], cwd=REPO, capture_output=True, text=True, timeout=1800,
        env={**os.environ, **env}, check=False)
    return done, sorted((results / "runs").glob("*/*/run.json"))


@pytest.fixture(scope="module")
def monkeypatch_module() -> Any:
    with pytest.MonkeyPatch.context() as patch:
        yield patch


@pytest.fixture(scope="module")
def ngram(sglang_cpu, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    results = tmp_path_factory.mktemp("ngram")
    done, records = run_suite("tiny_ngram_sglang_cpu", results, {})
    return {"done": done, "records": records}


@pytest.fixture(scope="module")
def standalone(sglang_cpu, tmp_path_factory: pytest.TempPathFactory,
               monkeypatch_module: pytest.MonkeyPatch) -> dict[str, Any]:
    # from its README line alone: the harness cuts the causal draft into its cache
    monkeypatch_module.delenv("HARNESS_TINY_CAUSAL_DRAFT", raising=False)
    results = tmp_path_factory.mktemp("standalone")
    done, records = run_suite("tiny_standalone_sglang_cpu", results, {})
    return {"done": done, "records": records}


def _records(run: dict[str, Any], count: int) -> list[dict[str, Any]]:
    done = run["done"]
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    assert len(run["records"]) == count, run["records"]
    return [json.loads(path.read_text()) for path in run["records"]]


def _check_record(record: dict[str, Any], run_json: Path, sglang_cpu: Any,
                  algorithm: str) -> None:
    where = json.dumps(record.get("verdict"), indent=1)
    assert record["verdict"]["status"] == "pass", where
    measured = record["measurement"]
    # both definitions, from per-request meta_info
    assert measured["metric"] == "server_avg"
    assert measured["accept_length_server_avg"] > 1.0
    assert measured["accept_length_per_request"] > 1.0
    assert measured["n_requests"] == measured["n_planned"] and not measured["partial"]
    exact = (measured["correct_drafts"] + measured["verify_steps"]) / measured["verify_steps"]
    assert measured["accept_length_server_avg"] == pytest.approx(exact, abs=1e-12)
    # the server's own figure for the same measured window (--decode-log-interval 1)
    assert measured["server_reported_accept_length"] == pytest.approx(
        measured["accept_length_server_avg"], abs=1e-9), measured
    build = record["build"]
    assert build["engine"] == "sglang" and build["version"] == "0.5.23"
    assert build["spec"] == SPEC and build["python"] == sglang_cpu.python
    assert build["build_key"] and build["build_key"] in sglang_cpu.python
    freeze = (run_json.parent / builds.FREEZE_FILE).read_text()
    assert "sglang==0.5.23" in freeze and "torch==2.13.0+cpu" in freeze
    assert "sglang-kernel" not in freeze.lower() and "flashinfer" not in freeze.lower()
    assert record["provenance"]["stand_ins_sha256"] == {
        str(STAND_IN): builds.folder_sha256(STAND_IN)}
    command = record["launch"]["command"]
    assert command[command.index("--attention-backend") + 1] == "intel_amx"
    assert command[command.index("--speculative-algorithm") + 1] == algorithm
    assert ("--speculative-draft-model-path" in command) == (algorithm != "NGRAM")


def test_ngram_passes_on_the_real_server(ngram: dict[str, Any], sglang_cpu: Any) -> None:
    (record,) = _records(ngram, 1)
    _check_record(record, ngram["records"][0], sglang_cpu, "NGRAM")
    assert record["attention"] is None  # NGRAM loads no draft model


def test_standalone_passes_with_humaneval(standalone: dict[str, Any], sglang_cpu: Any) -> None:
    records = _records(standalone, 2)
    by_series = {r["suite"]["name"]: (r, p) for r, p in zip(records, standalone["records"],
                                                             strict=True)}
    assert set(by_series) == {"tiny_standalone_sglang_cpu",
                              "tiny_standalone_sglang_cpu.humaneval"}
    for record, path in by_series.values():
        _check_record(record, path, sglang_cpu, "STANDALONE")
    for record, _ in by_series.values():  # the draft the harness cut into its cache
        command = record["launch"]["command"]
        draft = command[command.index("--speculative-draft-model-path") + 1]
        assert "/reference/causal-2-" in draft
    humaneval = by_series["tiny_standalone_sglang_cpu.humaneval"][0]
    assert humaneval["workload"]["kind"] == "humaneval"
    assert humaneval["workload"]["stop"]  # the body ends at the Codex stop strings


@pytest.mark.parametrize("which", ["ngram", "standalone"])
def test_server_log_and_plot(which: str, request: pytest.FixtureRequest) -> None:
    run = request.getfixturevalue(which)
    run_dir = run["records"][0].parent
    log = (run_dir / "server.log").read_text(errors="replace")
    assert "fallback to torch_native" not in log  # the AMX probe's answer kept intel_amx
    assert "[harness] stopping the server: SIGTERM" in log
    assert "[harness] server stopped by the harness" in log
    assert (run_dir / RUN_PNG).stat().st_size > 0
