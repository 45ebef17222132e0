"""A bisect session from start to result: endpoints, steps, extensions, resume.

The session is a replay of its journal: the search is deterministic given the step
verdicts, so running the same loop again with the journal's entries in hand reaches the
point where the session stopped and carries on from there (`--resume`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from harness.errors import (
    BadInput,
    EngineError,
    Interrupted,
    interruption_text,
    sigterm_as_interrupt,
)
from harness.metrics.stats import Difference
from harness.protocols.bisect import search
from harness.protocols.bisect.journal import JournalEntry
from harness.protocols.bisect.rule import StepRule, endpoint_difference, significant
from harness.protocols.bisect.session import Session
from harness.protocols.bisect.steps import (
    BisectRule,
    Reference,
    endpoint_rule,
    measure,
    read_reference,
    reference_rule,
    step_rule,
)
from harness.suite.model import LoadedSuite

Say = Callable[[str], None]


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@dataclass
class SessionOutcome:
    """How a session ended; `report.summarise` turns it into the result."""

    session: Session
    entries: dict[str, JournalEntry]  # journal entries by role
    outcomes: dict[int, search.Outcome] = field(default_factory=dict)
    final: dict[int, str] = field(default_factory=dict)  # commit index -> role of its verdict
    order: list[int] = field(default_factory=list)  # commit indices in the order visited
    endpoint: Difference | None = None  # BAD - GOOD
    differ: bool = False


class Bisect:
    """Run (or resume) one session against its suite."""

    def __init__(self, session: Session, loaded: LoadedSuite, say: Say = _stderr) -> None:
        self.session, self.loaded, self.say = session, loaded, say
        self.done = {e["role"]: e for e in session.journal() if "role" in e}
        self.references: dict[int, Reference] = {}

    # ------------------------------------------------------------------ measurements

    def _settings(self, role: str, sha: str) -> dict[str, object]:
        s = self.session
        return {"session": s.session, "role": role, "commit": sha, "metric": s.metric}

    def _measure(self, role: str, sha: str, prompts: int, make_rule: Callable[[], BisectRule],
                 index: int | None) -> JournalEntry:
        if role in self.done:
            entry = self.done[role]
            if entry.get("commit") != sha:
                raise BadInput(f"{self.session.folder}: the journal's {role} measured "
                               f"{entry.get('commit')}, the search now asks {sha}; the "
                               "session's files were changed")
            return entry
        s = self.session
        measured = measure(self.loaded, s.endpoints.spec_for(sha), s.label(role), prompts,
                           make_rule(), Path(s.results), s.engine_python)
        measured.update({"role": role, "commit": sha, "index": index})
        entry = measured
        s.append(entry)
        self.done[role] = entry
        return entry

    def _reference(self, prompts: int) -> Reference:
        """GOOD's rows on `prompts` prompts (measured at most once per count)."""
        if prompts in self.references:
            return self.references[prompts]
        s = self.session
        role = "good" if prompts == s.prompts else f"good-{prompts}"
        self.say(f"GOOD  {s.good_sha[:12]} ({s.good}) on {prompts} prompts"
                 if role not in self.done else f"GOOD  {s.good_sha[:12]}: from the journal")
        entry = self._measure(role, s.good_sha, prompts,
                              lambda: reference_rule(s.metric, prompts,
                                                     self._settings(role, s.good_sha)), None)
        run_dir = entry.get("run_dir")
        if entry.get("verdict") == "skip" or not run_dir:
            raise EngineError(f"GOOD ({s.good}) could not be measured: {entry.get('reason')}")
        reference = read_reference(Path(run_dir), s.metric)
        if len(reference.tokens) < prompts:
            raise EngineError(f"GOOD's record {run_dir} has {len(reference.tokens)} "
                              f"of {prompts} requests")
        self.references[prompts] = reference
        return reference

    # ------------------------------------------------------------------ the session

    def run(self) -> SessionOutcome:
        s = self.session
        try:
            with sigterm_as_interrupt():
                return self._run()
        except (KeyboardInterrupt, Interrupted) as error:
            what = interruption_text(error)
            raise Interrupted(f"{what}; session {s.session} kept in {s.folder}: continue with "
                              f"`harness bisect --resume {s.session} --results {s.results}`"
                              ) from None

    def _run(self) -> SessionOutcome:
        s = self.session
        n = len(s.commits)
        result = SessionOutcome(s, self.done)
        good = self._reference(s.prompts)
        self.say(f"BAD   {s.bad_sha[:12]} ({s.bad}) on {s.prompts} prompts"
                 if "bad" not in self.done else f"BAD   {s.bad_sha[:12]}: from the journal")
        bad = self._measure("bad", s.bad_sha, s.prompts,
                            lambda: endpoint_rule(s.metric, good, s.prompts, s.alpha,
                                                  self._settings("bad", s.bad_sha)), n - 1)
        bad_run = bad.get("run_dir")
        if bad.get("verdict") == "skip" or not bad_run:
            raise EngineError(f"BAD ({s.bad}) could not be measured: {bad.get('reason')}")
        bad_pairs = read_reference(Path(bad_run), s.metric).pairs
        result.endpoint = endpoint_difference(good.pairs, bad_pairs, s.alpha)
        result.differ = significant(result.endpoint, s.alpha)
        if not result.differ:
            return result
        step = 0
        while (index := search.next_commit(n, result.outcomes)) is not None:
            step += 1
            verdict, role = self._step(step, index, result.endpoint.estimate)
            result.outcomes[index], result.final[index] = verdict, role
            result.order.append(index)
        return result

    def _step(self, step: int, index: int, effect: float) -> tuple[search.Outcome, str]:
        """Test one commit; an undecided one is extended once. (verdict, deciding role).

        Once GOOD has been measured on max_prompts (the first extension of the session),
        later steps are planned for max_prompts at once: no prompt is asked twice."""
        s = self.session
        commit = s.commits[index]
        role = f"step-{step:02d}"
        planned = s.max_prompts if s.max_prompts in self.references else s.prompts
        entry = self._test(role, index, planned, 0, effect)
        if entry.get("verdict") == "undecided" and s.max_prompts > planned:
            self.say(f"       undecided on {planned} prompts: extending to "
                     f"{s.max_prompts} (GOOD too, once a session)")
            entry = self._test(f"{role}-ext", index, s.max_prompts, planned, effect)
            role = f"{role}-ext"
        verdict = _outcome(entry)
        if verdict == "skip":
            self.say(f"       skipped like `git bisect skip`: {entry.get('reason')}")
        elif verdict == "undecided":
            self.say(f"       undecided after {entry.get('requests')} prompts: passed over "
                     f"like a skipped commit ({commit['sha'][:12]} stays a candidate)")
        return verdict, role

    def _test(self, role: str, index: int, prompts: int, after: int, effect: float
              ) -> JournalEntry:
        s = self.session
        commit = s.commits[index]
        good = self._reference(prompts)
        cached = role in self.done
        self.say(f"{role:<12} {commit['sha'][:12]} {commit['subject'][:50]}"
                 + (": from the journal" if cached else ""))
        rule = StepRule(good.tokens, good.steps, effect, s.alpha, prompts, s.wave, after)
        entry = self._measure(role, commit["sha"], prompts,
                              lambda: step_rule(s.metric, rule, good,
                                                self._settings(role, commit["sha"])), index)
        self.say("       " + describe_entry(entry))
        return entry


def _outcome(entry: JournalEntry) -> search.Outcome:
    """A step's verdict as the search reads it (the step rule gives only these)."""
    verdict = entry.get("verdict")
    if verdict in ("good", "bad", "skip", "undecided"):
        return verdict
    raise EngineError(f"a bisect step settled on {verdict!r}, not good, bad, skip or "
                      "undecided")


def describe_entry(entry: JournalEntry) -> str:
    """One line for a measured step: figure, paired difference, verdict, requests."""
    verdict = entry.get("verdict", "")
    if verdict == "skip":
        return f"skip: {entry.get('reason')}"
    stat = entry.get("stat", {})
    ci = entry.get("ci")
    value = entry.get("accept_length")
    figure = ("accept length " + (f"{value:.3f}" if value is not None else "none") + (
        f" (95% CI {ci[0]:.2f}-{ci[1]:.2f})" if ci else ""))
    paired = ""
    if "difference" in stat and "llr" in stat:
        paired = (f", vs GOOD {stat['difference']:+.3f} (se {stat.get('se', 0.0):.3f}, "
                  f"log LR {stat['llr']:+.1f}, bounds ±{stat.get('threshold', 0.0):.1f})")
    return (f"{figure} on {entry.get('requests')} prompts{paired} -> {verdict.upper()}")
