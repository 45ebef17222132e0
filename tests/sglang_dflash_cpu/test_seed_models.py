"""The seed's own model pairs in miniature through SGLang 0.5.23's own code on CPU
(`nox -s seed_models_cpu`; docs/seed-models.md).

Each pair runs on its GPU suite's launch line (suites/*_dflash_sglang_cpu.toml, derived
by harness/suite/cpu_variants.py): gemma-4's target through `models/gemma4_mm.py` and
`gemma4_causal.py`, Muse Glimmer's through `models/muse_glimmer.py`, both drafts through
`models/dflash.py` and the DFLASH worker. The seed's two cases:

- gemma-4: the draft's sliding layers are causal as released; PR #34524 reverted makes
  them bidirectional, which the preflight audit refuses before the launch and, measured
  anyway, the paired gate against the release fails;
- Muse Glimmer: every assistant layer is bidirectional, as released and reverted alike
  (its config class states `is_causal = False`); the revert changes nothing the gate sees.

Every run's runtime table (what the attention kernel received per draft layer) equals the
audit's.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from harness import builds
from tests.sglang_dflash_cpu.conftest import HERE, REVERT, SPEC, Run
from tests.sglang_dflash_cpu.conftest import harness_run as run_quietly

GEMMA = "gemma4_dflash_sglang_cpu"
MUSE = "muse_glimmer_dflash_sglang_cpu"
GEMMA_CONTRACT = [(True, 16)] * 4 + [(False, None)]
GEMMA_REVERTED = [(False, 16)] * 4 + [(False, None)]
MUSE_CONTRACT = [(False, 16)] * 5
SEED = builds.REPO_ROOT / "reference_engine" / "seed"


def harness_run(suite: str, results: Path, *extra: str) -> Run:
    """`harness run` as a user types it, its verdict lines printed (the session runs pytest
    with -s) so that every log states each run's figure, CI and verdict."""
    run = run_quietly(suite, results, *extra)
    print(f"\n$ harness run {suite} {' '.join(extra)}  -> exit {run.done.returncode}")
    print("\n".join(run.done.stdout.splitlines()[-20:]))
    return run


def _record(run: Run, series: str, label: str | None = None) -> dict[str, Any]:
    records = [json.loads(p.read_text()) for p in run.records(series)]
    records = [r for r in records if label is None or r.get("label") == label]
    assert records, run.output
    return records[-1]


def _audit(record: dict[str, Any]) -> list[tuple[bool, int | None]]:
    return [(layer["causal"], layer["window"]) for layer in record["attention"]]


def _runtime(record: dict[str, Any]) -> list[tuple[bool, int | None]]:
    table = {r["index"]: (r["causal"], r["window"]) for r in record["attention_runtime"]
             if r["kernel"] == "extend"}
    return [table[i] for i in sorted(table)]


@pytest.fixture(scope="module")
def seed_results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("seed-results")


@pytest.fixture(scope="module")
def gemma(sglang_cpu: Any, seed_results: Path) -> Run:
    return harness_run(GEMMA, seed_results)


@pytest.fixture(scope="module")
def gemma_reverted(gemma: Run, seed_results: Path) -> Run:
    return harness_run(GEMMA, seed_results, "--patch", str(REVERT), "--no-enforce-contract",
                       "--against", SPEC, "--label", "reverted")


@pytest.fixture(scope="module")
def muse(sglang_cpu: Any, seed_results: Path) -> Run:
    return harness_run(MUSE, seed_results)


@pytest.fixture(scope="module")
def muse_reverted(muse: Run, seed_results: Path) -> Run:
    return harness_run(MUSE, seed_results, "--patch", str(REVERT), "--against", SPEC,
                       "--label", "reverted")


def _passes(run: Run, series: str, architecture: str) -> dict[str, Any]:
    assert run.done.returncode == 0, run.output
    record = _record(run, series)
    assert record["verdict"]["status"] == "pass", record["verdict"]
    measured = record["measurement"]
    assert measured["n_requests"] == measured["n_planned"]
    exact = (measured["correct_drafts"] + measured["verify_steps"]) / measured["verify_steps"]
    assert measured["accept_length_server_avg"] == pytest.approx(exact, abs=1e-12)
    # the harness's figure is SGLang's own /server_info figure for the window
    assert measured["server_reported_accept_length"] == pytest.approx(
        measured["accept_length_server_avg"], abs=1e-9)
    assert measured["accept_length_server_avg"] > 2.0  # the draft is accepted well above 1
    log = (run.records(series)[-1].parent / "server.log").read_text()
    assert f"architectures=['{architecture}']" in log  # SGLang's own model class served
    return record


def test_gemma4_passes_through_sglangs_gemma4_code(gemma: Run) -> None:
    record = _passes(gemma, GEMMA, "Gemma4ForConditionalGeneration")
    assert _audit(record) == GEMMA_CONTRACT
    assert _runtime(record) == GEMMA_CONTRACT
    targets = {r["model"] for r in _runtime_rows(gemma, GEMMA) if r["model"] != "dflash"}
    assert targets == {"gemma4_mm"}


def _runtime_rows(run: Run, series: str) -> list[dict[str, Any]]:
    path = run.records(series)[-1].parent / "attention-runtime.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_gemma4_target_layers_got_their_windows(gemma: Run) -> None:
    """The target's own layers, as the kernel received them: 5 sliding (window 32, causal)
    then the full layer (no window), SGLang's gemma-4 code deciding."""
    rows = {(r["layer"], r["causal"], r["window"]) for r in _runtime_rows(gemma, GEMMA)
            if r["model"] == "gemma4_mm"}
    assert rows == {*((i, True, 32) for i in range(5)), (5, True, None)}


def test_gemma4_reverted_is_caught_by_the_preflight(sglang_cpu: Any, tmp_path: Path) -> None:
    run = harness_run(GEMMA, tmp_path / "results", "--patch", str(REVERT))
    assert run.done.returncode == 1, run.output
    record = _record(run, GEMMA)
    assert record["launch"] is None
    assert record["verdict"]["reasons"][1:] == [
        f"layer {i}: expected causal, got bidirectional" for i in range(4)]


def test_gemma4_reverted_is_caught_by_the_paired_gate(gemma_reverted: Run) -> None:
    assert gemma_reverted.done.returncode == 1, gemma_reverted.output
    record = _record(gemma_reverted, GEMMA, label="reverted")
    assert _audit(record) == GEMMA_REVERTED
    assert _runtime(record) == GEMMA_REVERTED
    paired = record["paired"]
    assert paired["status"] == "fail" and paired["result"]["decision"] == "worse", paired
    # and by the calibrated floor (suites/gemma4_dflash_sglang_cpu.toml), not only the gate
    assert paired["floors_status"] == "fail", paired
    assert paired["against"]["reused"] and paired["against"]["spec"] == SPEC


def test_muse_glimmer_passes_through_sglangs_muse_glimmer_code(muse: Run) -> None:
    record = _passes(muse, MUSE, "MuseGlimmerForConditionalGeneration")
    assert _audit(record) == MUSE_CONTRACT
    assert _runtime(record) == MUSE_CONTRACT
    log = (muse.records(MUSE)[-1].parent / "server.log").read_text()
    assert "Muse Glimmer: loaded" in log  # MuseGlimmerForCausalLM.load_weights ran


def test_muse_glimmer_is_bidirectional_both_ways(muse_reverted: Run) -> None:
    """The revert touches the default of an undeclared `is_causal`; the assistant's config
    class declares it False, so the contract holds and the gate finds no regression."""
    assert muse_reverted.done.returncode == 0, muse_reverted.output
    record = _record(muse_reverted, MUSE, label="reverted")
    assert record["build"]["patch_sha256"] == builds.file_sha256(REVERT)
    assert _audit(record) == MUSE_CONTRACT
    assert _runtime(record) == MUSE_CONTRACT
    assert record["paired"]["status"] == "pass", record["paired"]


def test_the_trained_muse_glimmer_decoder_is_transformers_own(sglang_cpu: Any) -> None:
    """The decoder the build trains (reference_engine/muse_glimmer_model.py)
    computes what transformers 5.19's MuseGlimmerForConditionalGeneration (SGLang 0.5.23's
    pin) computes on the shipped target."""
    done = subprocess.run([sglang_cpu.python, str(HERE / "muse_oracle.py"),
                           str(SEED / "muse_glimmer" / "target")], capture_output=True,
                          text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["same_argmax"], result
    assert result["max_abs_diff"] < 1e-3 * max(1.0, result["logit_scale"]), result
