"""Whose fault a speedup drop is (`harness forced --against`, harness.protocols.
forced_split): from two ladders' run records on disk, read back through the door, the
system's share (B's speedup against A's at equal forced acceptance, paired by question)
and the draft's (B's real accept length against A's, the paired gate's test), each judged
by its own tolerance by the one judge; the verdict names the share that failed, a share
with no test is an error (never a pass), and the split survives the record's reader."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from harness.errors import ExitCode
from harness.protocols.forced_split import split_evidence, split_record
from harness.results import record as rec
from harness.results.forced import FORCED, ForcedPoint, ForcedRecord
from harness.results.readers import read_forced, read_run
from harness.results.writer import save_run
from harness.run.judge import decide_split
from harness.suite.forced import ForcedSetting
from tests.results.records import make_night

QUESTIONS = 30
SETTING = ForcedSetting(system_max_drop=0.10, draft_relative_drop=0.05)
START = datetime(2026, 1, 2, tzinfo=UTC)


def _speedup(spec_tpot_s: float) -> rec.Speedup:
    """A speedup over a 20 ms target alone, speculation at `spec_tpot_s` a token, with
    a little spread by question (so the bootstrap has an interval to draw)."""
    rows = [rec.QuestionSpeed(
        question_index=q, speculative_tpot_sum_s=spec_tpot_s * (1 + 0.02 * (q % 5 - 2)),
        speculative_tpot_n=1, speculative_tokens=40, speculative_e2e_s=40 * spec_tpot_s,
        target_alone_tpot_sum_s=0.020 * (1 + 0.02 * (q % 3 - 1)), target_alone_tpot_n=1,
        target_alone_tokens=40, target_alone_e2e_s=40 * 0.020) for q in range(QUESTIONS)]
    tpot = 0.020 / spec_tpot_s
    return rec.Speedup(n_prompts=QUESTIONS, tpot=tpot, tpot_ci=(tpot * 0.9, tpot * 1.1),
                       throughput=tpot, throughput_ci=(tpot * 0.9, tpot * 1.1),
                       speculative_in_flight=1.0, target_alone_in_flight=1.0,
                       per_question=rows)


def _point(results: Path, forced: float | None, tokens: int, spec_tpot_s: float,
           label: str) -> ForcedPoint:
    """One point's run record (rows of `tokens` over 10 verify steps a question, a few
    questions one token shorter) with its speedup, written under `results`."""
    steps = [10] * QUESTIONS
    made = [tokens - (q % 4 == 0 and tokens > 10) for q in range(QUESTIONS)]
    tag = "real" if forced is None else f"{forced:g}"
    folder = make_night(results / "templates", made, steps, START,
                        suite=f"tiny-forced-{tag}", label=label)
    record = read_run(folder)
    assert record.measurement is not None
    measured = record.measurement.model_copy(update={"speedup": _speedup(spec_tpot_s)})
    rows = [rec.RequestRow(index=q, question_index=q, completion_tokens=t, verify_steps=10,
                           spec_accept_length=t / 10, latency_s=0.5)
            for q, t in enumerate(made)]
    again = save_run(results, record.model_copy(update={"measurement": measured}), rows)
    found = measured.speedup
    assert found is not None
    return ForcedPoint(forced=forced, achieved=measured.accept_length, speedup_tpot=found.tpot,
                       speedup_throughput=found.throughput, series=f"tiny-forced-{tag}",
                       run_dir=str(again.relative_to(results)), status="pass")


def _ladder(results: Path, label: str, real_tokens: int, spec_tpot_s: float) -> ForcedRecord:
    points = [_point(results, None, real_tokens, spec_tpot_s, label),
              _point(results, 1.0, 10, spec_tpot_s * 2, label),
              _point(results, 3.0, 30, spec_tpot_s, label)]
    return ForcedRecord(forced_id=f"id-{label}", suite="tiny", engine="reference",
                        knob="REFERENCE_SIMULATE_ACC_LEN", block_size=8, started_at=START,
                        metric="per_request", definitions={}, points=points, status="pass")


@pytest.mark.parametrize(("b_real_tokens", "b_spec_tpot_s", "blamed", "code"), [
    (30, 0.010, [], ExitCode.PASS),  # the same build twice: neither
    (30, 0.014, ["system"], ExitCode.BELOW_FLOOR),  # same tokens, 40% more time a step
    (22, 0.010, ["draft"], ExitCode.BELOW_FLOOR),  # same speed when forced, fewer tokens
    (22, 0.014, ["system", "draft"], ExitCode.BELOW_FLOOR),
])
def test_the_verdict_names_the_share_that_lost_the_speedup(
        tmp_path: Path, b_real_tokens: int, b_spec_tpot_s: float, blamed: list[str],
        code: ExitCode) -> None:
    a = _ladder(tmp_path, "a", 30, 0.010)
    b = _ladder(tmp_path, "b", b_real_tokens, b_spec_tpot_s).points
    evidence = split_evidence(a, b, tmp_path, SETTING, "per_request")
    # two forced accept lengths on both builds, both speedup figures each
    assert [(s.forced, s.speedup.figure) for s in evidence.system] == [
        (1.0, "speedup_tpot"), (1.0, "speedup_throughput"),
        (3.0, "speedup_tpot"), (3.0, "speedup_throughput")]
    assert all(s.speedup.result is not None and s.speedup.result.alpha == 0.05 / 4
               for s in evidence.system)  # the side's alpha shared by its four tests
    judged = decide_split(evidence)
    assert judged.blamed == blamed
    assert judged.exit_code == code
    head = judged.verdict.reasons[0]
    assert head.startswith("whose fault:")
    assert all(share in head for share in blamed)

    split = split_record(evidence, judged, SETTING, "per_request", a, b, "reference:noise=0",
                         None)
    assert split.draft.a == pytest.approx(a.points[0].achieved)
    assert split.draft.b == pytest.approx(b[0].achieved)
    assert split.draft.difference_ci is not None
    assert split.system[0].ratio_ci is not None
    # the record keeps it, and reads back whole through the door
    record = _ladder(tmp_path, "b2", b_real_tokens, b_spec_tpot_s).model_copy(
        update={"split": split, "status": split.status})
    folder = FORCED.new_folder(tmp_path, "tiny", START, "split01")
    FORCED.write(folder, record, tmp_path)
    assert read_forced(folder) == record


def test_a_share_without_a_test_is_an_error_never_a_pass(tmp_path: Path) -> None:
    a = _ladder(tmp_path, "a", 30, 0.010)
    b = _ladder(tmp_path, "b", 30, 0.010).points
    lost = [p.model_copy(update={"run_dir": None}) if p.forced is None else p for p in b]
    judged = decide_split(split_evidence(a, lost, tmp_path, SETTING, "per_request"))
    assert judged.draft_status == "error" and judged.system_status == "pass"
    assert judged.exit_code == ExitCode.ENGINE_ERROR and judged.blamed == []
    assert any("draft ERROR" in r and "never a pass" in r for r in judged.verdict.reasons)

    unshared = [p for p in b if p.forced is None]  # no forced point in common
    judged = decide_split(split_evidence(a, unshared, tmp_path, SETTING, "per_request"))
    assert judged.system_status == "error" and judged.exit_code == ExitCode.ENGINE_ERROR
