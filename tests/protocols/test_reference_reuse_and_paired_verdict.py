"""Reuse of the reference side (only the same measurement), and B's verdict from floors
and the paired gate, on run folders written here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.errors import EngineError
from harness.protocols import pairing
from harness.results.record import RunRecord, Verdict
from harness.suite.gate import Gate
from harness.suite.model import load_suite

SUITE = load_suite("tiny_dflash_cpu").suite


def gpus(name: str) -> list[dict]:
    return [{"index": i, "name": name, "memory_gib": 80.0} for i in range(2)]


def record(run_id: str, **changes: object) -> dict:
    """A whole run record (the door reads no other) of run `run_id`, with `changes`."""
    base = {
        "schema_version": 2, "kind": "run", "run_id": run_id,
        "started_at": "2026-01-01T00:00:00+00:00",
        "suite": {"name": "s", "sha256": "suite-1", "document": {"topology": {"tp_size": 2}}},
        "build": {"engine": "sglang", "git_sha": "abc", "git_dirty": False,
                  "freeze_sha256": "deps-1", "options": {"algorithm": "DFLASH"}},
        "provenance": {"harness_version": "0.1.0", "python": "3.11", "platform": "linux",
                       "driver": "550.1", "cuda": "12.4", "harness_git_sha": "h1",
                       "harness_git_dirty": False, "gpus": gpus("H100")},
        "workload": {"kind": "gsm8k", "data_sha256": "data-1", "prompts_sha256": "prompts-1"},
        "measurement": {"accept_length": 5.6, "n_requests": 4, "n_planned": 4},
        "verdict": {"status": "pass"},
    }
    for dotted, value in changes.items():
        where = base
        *path, last = dotted.split("__")
        for key in path:
            where = where[key]
        where[last] = value
    return base


def write_run(root: Path, name: str, data: dict, rows: list[dict] | None = None) -> Path:
    folder = root / "runs" / "s" / name
    folder.mkdir(parents=True)
    (folder / "run.json").write_text(json.dumps(data))
    rows = rows if rows is not None else [
        {"index": i, "question_index": i, "completion_tokens": 40 + i, "verify_steps": 10,
         "correct_drafts": 30 + i, "latency_s": 1.0} for i in range(4)]
    (folder / "requests.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


def wanted_of(data: dict) -> dict:
    """The identity a run made now would have to reuse the stored record `data`."""
    return pairing.identity_of(RunRecord.model_validate(data))


WANTED = wanted_of(record("x"))


@pytest.mark.parametrize("change", [
    {"suite__sha256": "suite-2"}, {"workload__data_sha256": "data-2"},
    {"build__git_sha": "def"}, {"build__freeze_sha256": "deps-2"},
    {"build__git_dirty": True}, {"provenance__driver": "560.0"},
    {"provenance__gpus": gpus("H200")},
    {"suite__document": {"topology": {"tp_size": 1}}},
    {"provenance__harness_version": "0.2.0"}, {"build__options": {"algorithm": "EAGLE"}},
    # issue 27, case 4: what else changes the measurement
    {"workload__prompts_sha256": "prompts-2"}, {"provenance__harness_git_sha": "h2"},
    {"build__options": {"algorithm": "DFLASH",
                        "served": {"target": "org/t", "target_revision": "r2",
                                   "draft": "org/d", "draft_revision": None}}},
    {"provenance__weights_sha256": {"target": "w2"}},
])
def test_a_stored_run_that_differs_in_any_identity_field_is_not_reused(
        tmp_path: Path, change: dict) -> None:
    write_run(tmp_path, "20260101T000000Z-other", record("other", **change))
    assert pairing.reusable(tmp_path, "s", WANTED) is None
    same = write_run(tmp_path, "20250101T000000Z-same", record("same"))
    assert pairing.reusable(tmp_path, "s", WANTED) == same


def test_a_cpu_engine_is_reused_only_on_the_same_cpu(tmp_path: Path) -> None:
    cpu = record("cpu", provenance__gpus=[], provenance__cpu="Xeon 8480",
                 provenance__cpu_isa=["avx512f"])
    wanted = wanted_of(cpu)
    write_run(tmp_path, "20260101T000000Z-other", record(
        "other", provenance__gpus=[], provenance__cpu="EPYC 9654",
        provenance__cpu_isa=["avx512f"]))
    assert pairing.reusable(tmp_path, "s", wanted) is None
    same = write_run(tmp_path, "20250101T000000Z-same", cpu)
    assert pairing.reusable(tmp_path, "s", wanted) == same


def test_an_edited_harness_or_unhashed_prompts_are_never_reused(tmp_path: Path) -> None:
    for name, changed in (("dirty", record("d", provenance__harness_git_dirty=True)),
                          ("unhashed", record("u", workload__prompts_sha256=None))):
        write_run(tmp_path, f"20260101T000000Z-{name}", changed)
        assert pairing.reusable(tmp_path, "s", wanted_of(changed)) is None


def test_pairing_refuses_a_reference_that_sent_other_prompts(tmp_path: Path) -> None:
    """Case 4: the harness's GSM8K prompt text changed, A reused: B was judged "worse by
    -10.85%". Now the prompts hash (workload) and the server's per-question prompt hash
    (rows) must agree, else no pairing."""
    a = [40, 50, 45]
    judge = judge_with(tmp_path, a, Gate(relative_drop=0.02))
    judge.references[SUITE.name].prompts_sha256 = "prompts-1"
    with pytest.raises(EngineError, match="other prompts"):
        judge.evidence(SUITE, rows(a), "prompts-2")
    assert judge.evidence(SUITE, rows(a), "prompts-1").result.decision == "not_worse"
    judge.references[SUITE.name].prompt_hashes = {0: "tok-a", 1: "tok-b"}
    b = rows(a)
    b[1]["prompt_sha256"] = "tok-other"
    with pytest.raises(EngineError, match="different prompt tokens"):
        judge.evidence(SUITE, b)


def test_a_dirty_build_without_a_source_hash_is_never_reused(tmp_path: Path) -> None:
    dirty = record("dirty", build__git_dirty=True)
    write_run(tmp_path, "20260101T000000Z-dirty", dirty)
    assert pairing.reusable(tmp_path, "s", wanted_of(dirty)) is None
    hashed = record("hashed", build__git_dirty=True, build__source_hash="sha256:ab")
    folder = write_run(tmp_path, "20260102T000000Z-hashed", hashed)
    assert pairing.reusable(tmp_path, "s", wanted_of(hashed)) == folder


@pytest.mark.parametrize("change", [
    {"measurement__partial": True}, {"measurement__stopped_early": True},
    {"measurement__n_requests": 3}, {"verdict": {"status": "error"}},
    {"measurement__accept_length": None}, {"kind": "baseline"},
])
def test_an_incomplete_run_is_never_a_reference(tmp_path: Path, change: dict) -> None:
    write_run(tmp_path, "20260101T000000Z-bad", record("bad", **change))
    assert pairing.reusable(tmp_path, "s", WANTED) is None


def test_the_newest_matching_run_is_taken_and_unreadable_ones_passed_over(
        tmp_path: Path) -> None:
    write_run(tmp_path, "20250101T000000Z-old", record("old"))
    new = write_run(tmp_path, "20250202T000000Z-new", record("new"))
    broken = tmp_path / "runs" / "s" / "20260101T000000Z-broken"
    broken.mkdir()
    (broken / "run.json").write_text("{not json")
    assert pairing.reusable(tmp_path, "s", WANTED) == new


def rows(tokens: list[int], steps: int = 10) -> list[dict]:
    return [{"index": i, "question_index": i, "completion_tokens": t, "verify_steps": steps,
             "correct_drafts": t - steps, "latency_s": 1.0} for i, t in enumerate(tokens)]


def judge_with(tmp_path: Path, a_tokens: list[int], gate: Gate) -> pairing.PairedJudge:
    n = len(a_tokens)
    folder = write_run(tmp_path, "20250101T000000Z-ref", record(
        "ref", measurement__n_requests=n, measurement__n_planned=n), rows(a_tokens))
    reference = pairing.reference_from(folder, SUITE.name, "server_avg", "reference:x", True)
    return pairing.PairedJudge(gate, {SUITE.name: reference})


def judged(judge: pairing.PairedJudge, b_rows: list[dict], floor: float = 1.0,
           settled: dict | None = None) -> tuple[Verdict, dict]:
    """B's verdict as the runner forms it: the one judge on B's measurement (against a
    floor of `floor`) and the gate's evidence."""
    from harness.metrics.measure import summarise
    from harness.results.record import RequestRow
    from harness.run.judge import Evidence, decide
    from harness.suite.model import Floors

    requests = [RequestRow(**row, spec_accept_length=row["completion_tokens"]
                           / row["verify_steps"]) for row in b_rows]
    measurement = summarise(requests, "server_avg", 1.0, None)
    found = decide(Evidence(measurement, Floors(accept_length=floor), settled,
                            paired=judge.evidence(SUITE, b_rows)))
    return found.verdict, found.paired


def test_verdict_is_the_worse_of_floors_and_gate_and_names_the_reference(
        tmp_path: Path) -> None:
    a = [40, 50, 45, 38, 60, 42]
    judge = judge_with(tmp_path, a, Gate(relative_drop=0.02))
    verdict, paired = judged(judge, rows(a))
    assert verdict.status == "pass" and paired["result"]["decision"] == "not_worse"
    assert paired["against"] == {"run_id": "ref", "path": str(judge.references[SUITE.name].run_dir),
                                 "spec": "reference:x", "reused": True}
    assert any("paired against run ref" in r for r in verdict.reasons)
    dropped = [t - 4 for t in a]  # -10% on every question: worse with certainty
    verdict, paired = judged(judge, rows(dropped))
    assert verdict.status == "fail" and paired["floors_status"] == "pass"
    assert any(r.startswith("relative gate FAIL") for r in verdict.reasons)
    verdict, _ = judged(judge, rows(a), floor=9.0)
    assert verdict.status == "fail"  # the floor is a backstop the gate cannot lift


@pytest.mark.parametrize("inconclusive, status", [("fail", "fail"), ("pass", "pass")])
def test_inconclusive_is_judged_by_the_gate_setting(tmp_path: Path, inconclusive: str,
                                                     status: str) -> None:
    a = [40, 50, 45, 38, 60, 42]
    b = [44, 45, 47, 36, 55, 43]  # noisy, about -2%
    judge = judge_with(tmp_path, a, Gate(relative_drop=0.02, inconclusive=inconclusive))
    verdict, paired = judged(judge, rows(b))
    assert paired["result"]["decision"] == "inconclusive"
    assert verdict.status == status
    assert any("inconclusive (judged" in r for r in verdict.reasons)


def test_b_asking_a_question_the_reference_did_not_is_an_engine_error(tmp_path: Path) -> None:
    judge = judge_with(tmp_path, [40, 50, 45], Gate(relative_drop=0.02))
    extra = rows([40, 50, 45, 41])
    with pytest.raises(EngineError, match="not the same prompts"):
        judge.evidence(SUITE, extra)


def test_sequential_stop_rule_settles_on_the_paired_rule(tmp_path: Path) -> None:
    a = [40 + (i * 7) % 23 for i in range(120)]
    judge = judge_with(tmp_path, a, Gate(relative_drop=0.02))
    stop = judge.stop_rule(SUITE, 120)
    assert stop.looks(120) == [50, 100, 120]
    assert stop.decide_rows(rows(a[:50])) == "not_worse"  # identical: settled at 50
    verdict, paired = judged(judge, rows(a[:50]), settled={"accept length": "pass"})
    assert paired["result"]["alpha"] == pytest.approx(stop.rule.nominal_alphas()[0])
    assert verdict.status == "pass"
    assert stop.settings()["against"] == "ref"


def test_a_suite_this_host_cannot_run_is_skipped_before_either_side(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No GPU here: a 1-GPU suite paired against a release ends skipped (exit 4), with
    nothing measured and no engine built for either side."""
    from harness.errors import ExitCode
    from harness.run.runner import RunOptions

    monkeypatch.delenv("HARNESS_GPU_INVENTORY", raising=False)  # this host: no GPU
    built: list[str] = []
    monkeypatch.setattr(pairing, "expected_identities",
                        lambda loaded, options: built.append(options.sglang) or {})
    loaded = load_suite("qwen3_8b_dflash")
    options = RunOptions(results_dir=tmp_path, sglang="sglang==0.5.23", plot=False,
                         progress=False)
    outcome = pairing.run_paired(loaded, options, "sglang==0.5.22")
    assert outcome.status == "skipped" and outcome.exit_code == ExitCode.SKIPPED
    assert built == [] and not (tmp_path / "runs").exists()
