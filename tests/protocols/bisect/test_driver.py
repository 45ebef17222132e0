"""The session driver's paths that a reproducible CPU engine never takes: a commit that
stays undecided (extended, GOOD measured again once), a commit that fails to build, and
resuming from a journal cut at any point. Only `run_suite` is replaced: a stand-in that
answers each build with simulated per-prompt counts (`harness.protocols.bisect.simulate`, noisy
like GPU runs), sends them through the bisect's own stop rule at its looks, as the
driver does, and writes the rows where a run would. Everything else is the real code.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from harness.errors import BadInput, EngineError
from harness.protocols.bisect import report
from harness.protocols.bisect.driver import Bisect
from harness.protocols.bisect.session import create_session, load_session
from harness.protocols.bisect.simulate import simulate_builds
from harness.results.record import RequestRow
from harness.suite.model import SUITES_DIR, load_suite
from tests.protocols.bisect.history import make_history

TINY = SUITES_DIR / "tiny_dflash_cpu.toml"
GOOD, BAD = 5.6, 5.0


class FakeRuns:
    """`run_suite` for a given accept length per commit (None: the build fails)."""

    def __init__(self, accepts: dict[str, float | None], diverge: float = 1.0) -> None:
        self.accepts, self.diverge, self.calls = accepts, diverge, []

    def __call__(self, loaded: Any, options: Any) -> Any:
        sha = options.sglang.rpartition("@")[2]
        self.calls.append((options.label, sha))
        accept = self.accepts[sha]
        if accept is None:
            raise EngineError("reference-build.toml: not valid TOML")
        n = loaded.suite.workload.questions
        tokens, steps = simulate_builds(400, [GOOD, accept], seed=11, diverge=self.diverge)[
            0 if accept == GOOD and options.label.endswith("-good") else 1]
        rows = [RequestRow(index=i, question_index=i, completion_tokens=int(tokens[i]),
                           verify_steps=int(steps[i]), correct_drafts=int(tokens[i] - steps[i]),
                           spec_accept_length=float(tokens[i] / steps[i]), latency_s=0.1)
                for i in range(n)]
        rule = options.stop_rule
        settled = None
        for look in rule.looks(n):  # the driver's protocol: decide at each look
            settled = rule.decide_rows(rows[:look])
            if settled is not None:
                break
        used = rows[:look]
        runs = Path(options.results_dir) / "runs"
        runs.mkdir(parents=True, exist_ok=True)
        run_dir = runs / f"{len(list(runs.iterdir())):03d}"
        run_dir.mkdir()
        (run_dir / "requests.jsonl").write_text(
            "".join(json.dumps(r.model_dump(mode="json")) + "\n" for r in used))
        value = sum(r.correct_drafts + r.verify_steps for r in used) / sum(
            r.verify_steps for r in used)
        measurement = SimpleNamespace(
            n_requests=len(used), partial=False, accept_length=value,
            accept_length_ci=(value - 0.1, value + 0.1),
            sequential={"settled": settled, **rule.settings()})
        record = SimpleNamespace(run_id=f"run{len(self.calls)}", measurement=measurement)
        return SimpleNamespace(status="pass", reasons=[], run_dir=run_dir, record=record)


def start(tmp_path: Path, accepts_by_index: list[float | None], **kw: Any
          ) -> tuple[Any, dict[str, float | None], list[str]]:
    repo, shas = make_history(tmp_path / "engine", commits=len(accepts_by_index))
    session = create_session(
        load_suite(TINY), f"reference:{repo}@{shas[0]}", f"reference:{repo}@main",
        repo=None, results=tmp_path / "results", first_parent=True, paths=(), alpha=0.01,
        wave=50, prompts=200, max_prompts=400, engine_python=None, **kw)
    accepts = {shas[0]: GOOD, **dict(zip(shas[1:], accepts_by_index, strict=True))}
    return session, accepts, shas


def test_skip_and_extension(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # c1-c3 like GOOD, c4 fails to build, c5 halfway (undecided), c6-c8 like BAD
    layout = [GOOD, GOOD, GOOD, None, (GOOD + BAD) / 2, BAD, BAD, BAD]
    session, accepts, shas = start(tmp_path, layout)
    fake = FakeRuns(accepts)
    monkeypatch.setattr("harness.run.runner.run_suite", fake)
    lines: list[str] = []
    outcome = Bisect(session, load_suite(TINY), lines.append).run()
    result = report.summarise(outcome)
    roles = [e["role"] for e in session.journal()]
    by_role = {e["role"]: e for e in session.journal()}
    skipped = [e for e in by_role.values() if e["verdict"] == "skip"]
    assert [e["commit"] for e in skipped] == [shas[4]]
    assert "not valid TOML" in skipped[0]["reason"] and skipped[0].get("run_dir") is None
    assert any("skipped like `git bisect skip`" in line for line in lines)
    # the halfway commit is extended once; GOOD is measured again on 400 prompts, once
    assert roles.count("good-400") == 1
    extended = [r for r in roles if r.endswith("-ext")]
    assert len(extended) == 1 and by_role[extended[0]]["commit"] == shas[5]
    assert by_role[extended[0]]["prompts"] == 400
    assert any("extending to 400" in line for line in lines)
    # with halfway and broken commits in the way, the answer is a range holding the change
    assert result["status"] in ("found", "range")
    candidates = [c["sha"] for c in result["candidates"]]
    assert shas[6] in candidates or shas[5] in candidates
    assert set(candidates) <= set(shas[4:7])
    assert result["requests"] == sum(e["requests"] for e in session.journal())
    # one run a journal entry, labelled with the session and the role
    assert [label for label, _ in fake.calls] == [session.label(role) for role in roles]


@pytest.mark.parametrize("cut", [0, 1, 2, 4, 6])
def test_resume_replays_the_journal_and_measures_only_what_is_missing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cut: int) -> None:
    layout = [GOOD] * 5 + [BAD] * 11
    session, accepts, shas = start(tmp_path, layout)
    fake = FakeRuns(accepts)
    monkeypatch.setattr("harness.run.runner.run_suite", fake)
    first = report.summarise(Bisect(session, load_suite(TINY), lambda _: None).run())
    assert first["status"] == "found" and first["first_bad"]["sha"] == shas[6]
    assert first["steps"] <= 5
    journal = (session.folder / "steps.jsonl").read_text().splitlines()
    (session.folder / "steps.jsonl").write_text("".join(f"{line}\n" for line in journal[:cut]))
    fake.calls.clear()
    again = load_session(tmp_path / "results", session.session)
    second = report.summarise(Bisect(again, load_suite(TINY), lambda _: None).run())
    assert len(fake.calls) == len(journal) - cut  # only the missing measurements
    assert second["first_bad"]["sha"] == first["first_bad"]["sha"]
    assert {k: second[k] for k in ("status", "steps", "runs", "requests")} == {
        k: first[k] for k in ("status", "steps", "runs", "requests")}


@pytest.mark.parametrize(("field", "value", "named"), [
    ("verdict", "maybe", "verdict"),
    ("accept_length", "not a number", "accept_length"),
    ("stat", {"difference": "big"}, "stat.difference"),
    ("requests", [1], "requests"),
])
def test_an_edited_journal_entry_is_named_on_resume(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, field: str, value: object,
        named: str) -> None:
    """`--resume` replays the journal: a field changed by hand is bad input naming the
    line and the field, never read as a figure."""
    session, accepts, _ = start(tmp_path, [GOOD] * 2 + [BAD] * 2)
    monkeypatch.setattr("harness.run.runner.run_suite", FakeRuns(accepts))
    Bisect(session, load_suite(TINY), lambda _: None).run()
    path = session.folder / "steps.jsonl"
    lines = path.read_text().splitlines()
    edited = {**json.loads(lines[1]), field: value}
    path.write_text("\n".join([lines[0], json.dumps(edited), *lines[2:]]) + "\n")
    again = load_session(tmp_path / "results", session.session)
    with pytest.raises(BadInput, match=rf"steps.jsonl:2: {named}"):
        Bisect(again, load_suite(TINY), lambda _: None)


def test_a_good_endpoint_that_fails_is_an_error(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    session, accepts, shas = start(tmp_path, [GOOD, BAD])
    accepts[shas[0]] = None
    monkeypatch.setattr("harness.run.runner.run_suite", FakeRuns(accepts))
    with pytest.raises(EngineError, match=r"GOOD .* could not be measured: reference-build"):
        Bisect(session, load_suite(TINY), lambda _: None).run()


def test_rows_are_paired_by_question(tmp_path: Path) -> None:
    """The rule refuses rows whose questions differ from GOOD's."""
    from harness.protocols.bisect.rule import StepRule
    from harness.protocols.bisect.steps import Reference, step_rule

    good = simulate_builds(40, [GOOD], seed=1)[0]
    reference = Reference(tuple(range(40)), tuple(good[0]), tuple(good[1]))
    rule = step_rule("server_avg", StepRule(reference.tokens, reference.steps, -0.6, 0.01,
                                            40, 20), reference, {})
    rows = [RequestRow(index=i, question_index=i + 1, completion_tokens=10, verify_steps=5,
                       correct_drafts=5, spec_accept_length=2.0, latency_s=0.1)
            for i in range(20)]
    with pytest.raises(EngineError, match="questions differ from GOOD's"):
        rule.decide_rows(rows)
    assert np.isfinite(rule.looks(40)[-1])


class PrefixFloorErrors(FakeRuns):
    """A suite with a category floor: a step that settles on a prefix ends `error`
    ("category ... has a floor but no measured request"), as the runner's judge says."""

    def __call__(self, loaded: Any, options: Any) -> Any:
        outcome = super().__call__(loaded, options)
        if outcome.record.measurement.n_requests < loaded.suite.workload.questions:
            outcome.status = "error"
            outcome.reasons = ["category 'translation' has a floor but no measured request"]
        return outcome


def test_a_settled_step_is_never_skipped_for_a_floor_its_prefix_cannot_judge(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """issue 19, case 1: such steps were turned into skips (exit 7, several candidates)."""
    layout = [GOOD] * 5 + [BAD] * 11
    session, accepts, shas = start(tmp_path, layout)
    monkeypatch.setattr("harness.run.runner.run_suite", PrefixFloorErrors(accepts))
    result = report.summarise(Bisect(session, load_suite(TINY), lambda _: None).run())
    journal = session.journal()
    assert not [e for e in journal if e["verdict"] == "skip"]
    assert any(e["requests"] < 200 for e in journal if e["role"] not in ("good", "bad"))
    assert result["status"] == "found" and result["first_bad"]["sha"] == shas[6]
