"""One measurement of a bisect: a normal run of the suite against one commit's build,
with the bisect's rule in place of the suite's floor rule.

The rule (harness.run.drive.StopRule) sees the rows at its looks, in submission order, and
compares them prompt by prompt with GOOD's rows of the same questions. Its decision and
the statistic at the settling look go to the run record's `measurement.sequential`,
beside the session id, the role and the commit, so every record says what the step found.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.errors import BadInput, EngineError, HarnessError, Interrupted, TopologySkip
from harness.metrics.breakdown import question_pairs
from harness.protocols.bisect.journal import JournalEntry, Statistic, Verdict
from harness.protocols.bisect.rule import PairedLook, StepRule, endpoint_difference, significant
from harness.results.readers import read_requests
from harness.results.record import RequestRow
from harness.run import runner
from harness.suite.model import LoadedSuite, Suite
from harness.suite.schema import document_sha256

Pairs = tuple[list[float], list[int]]  # (numerators, weights) prompt by prompt


@dataclass(frozen=True)
class Reference:
    """GOOD's rows: the questions in the order sent, and their (numerator, steps)."""

    questions: tuple[Hashable, ...]
    tokens: tuple[float, ...]
    steps: tuple[int, ...]

    @property
    def pairs(self) -> Pairs:
        return list(self.tokens), list(self.steps)


def question_rows(rows: Sequence[RequestRow], metric: str
                  ) -> tuple[tuple[Hashable, ...], Pairs]:
    """(questions in the order asked, (numerators, verify steps) per question): the turns
    of a multi-turn question summed, as every statistic of the harness does."""
    questions, tokens, steps = question_pairs(rows, metric)
    return tuple(questions), (tokens, steps)


def read_reference(run_dir: Path, metric: str) -> Reference:
    """A run's questions in the order asked, in the suite's metric."""
    rows = sorted(read_requests(Path(run_dir)), key=lambda row: row.index)
    questions, (tokens, steps) = question_rows(rows, metric)
    return Reference(questions, tuple(tokens), tuple(steps))


class BisectRule:
    """The runner's stop rule for one bisect measurement (see module docstring)."""

    def __init__(self, metric: str, looks: Sequence[int], reference: Reference | None,
                 decide: Callable[[Pairs], tuple[str | None, Statistic]],
                 settings: dict[str, object]) -> None:
        self.metric, self._looks, self.reference = metric, list(looks), reference
        self._decide, self._settings = decide, settings
        self.last: Statistic = {}

    def looks(self, max_n: int) -> list[int]:
        if self._looks[-1] != max_n:
            raise EngineError(f"bisect rule planned for {self._looks[-1]} prompts, the run "
                              f"has {max_n}")
        return list(self._looks)

    def decide_rows(self, rows: Sequence[RequestRow]) -> str | None:
        """The driver hands the rows of the first `look` questions (all their turns)."""
        questions, pairs = question_rows(rows, self.metric)
        if len(questions) not in self._looks:
            return None
        if self.reference is not None and questions != self.reference.questions[
                :len(questions)]:
            raise EngineError("the step's questions differ from GOOD's: cannot pair them")
        verdict, seen = self._decide(pairs)
        self.last = {**seen, "n": len(questions)}
        return verdict

    def settings(self) -> dict[str, object]:
        return {"rule": "bisect", **self._settings, **self.last}


def reference_rule(metric: str, prompts: int, settings: dict[str, object]) -> BisectRule:
    """GOOD: all prompts, no stop; it is the reference of every step."""
    return BisectRule(metric, [prompts], None, lambda _: ("reference", Statistic()), settings)


def endpoint_rule(metric: str, good: Reference, prompts: int, alpha: float,
                  settings: dict[str, object]) -> BisectRule:
    """BAD: all prompts, no stop (an early stop would overstate |Δ|); then the paired
    test against GOOD."""
    def decide(pairs: Pairs) -> tuple[str, Statistic]:
        n = len(pairs[0])
        difference = endpoint_difference((good.tokens[:n], good.steps[:n]), pairs, alpha)
        verdict = "differs" if significant(difference, alpha) else "no difference"
        ci = list(difference.ci) if difference.ci is not None else None
        return verdict, {"difference": difference.estimate, "se": difference.se,
                         "p_value": difference.p_value, "difference_ci": ci}
    return BisectRule(metric, [prompts], good, decide, settings)


def step_rule(metric: str, rule: StepRule, good: Reference, settings: dict[str, object]
              ) -> BisectRule:
    def decide(pairs: Pairs) -> tuple[str | None, Statistic]:
        look: PairedLook = rule.look(*pairs)
        return rule.decide(*pairs), {"difference": look.difference, "se": look.se,
                                     "llr": look.llr, "threshold": look.threshold}
    return BisectRule(metric, rule.looks(), good, decide,
                      {**settings, "effect": rule.effect, "alpha": rule.alpha,
                       "wave": rule.wave, "after": rule.after})


def with_questions(loaded: LoadedSuite, questions: int) -> LoadedSuite:
    """The suite asking its first `questions` questions (the record shows the count).
    A workload with a fixed set (Spec-Bench: no `questions` field) stays as it is;
    `session.prompt_counts` allows it no other count."""
    if "questions" not in type(loaded.suite.workload).model_fields:
        return loaded
    document = json.loads(json.dumps(loaded.document))
    document["workload"] = {**document.get("workload", {}), "questions": questions}
    try:
        suite = Suite.model_validate(document)
    except ValueError as error:
        raise BadInput(f"{loaded.path}: {questions} questions: {error}") from None
    return LoadedSuite(suite=suite, path=loaded.path, sha256=document_sha256(document),
                       document=document)


def measure(loaded: LoadedSuite, spec: str, label: str, prompts: int, rule: BisectRule,
            results: Path, engine_python: str | None) -> JournalEntry:
    """Run the suite on one build: a journal entry with the verdict, or a skip (the build
    or the launch failed) with the reason. Interrupts and topology skips propagate."""
    options = runner.RunOptions(results_dir=results, sglang=spec, label=label, plot=False,
                                progress=False, engine_python=engine_python,
                                enforce_contract=False, stop_rule=rule,
                                entries=["main"])  # the suite's main workload
    entry: JournalEntry = {"label": label, "spec": spec, "prompts": prompts}
    try:
        # through the module: a test stands in for the runner there
        outcome = runner.run_suite(with_questions(loaded, prompts), options)
    except (Interrupted, TopologySkip):
        raise
    except HarnessError as error:  # e.g. the commit's config does not parse: no run folder
        return {**entry, "verdict": "skip", "reason": error.message, "requests": 0}
    if outcome.status == "skipped":
        raise TopologySkip("; ".join(outcome.reasons))
    record = outcome.record
    entry["run_dir"] = str(outcome.run_dir) if outcome.run_dir else None
    entry["run_id"] = record.run_id if record else None
    measurement = record.measurement if record else None
    entry["requests"] = (measurement.n_requests or 0) if measurement else 0
    settled = (measurement.sequential or {}).get("settled") if measurement else None
    # A step the rule settled on complete requests counts, even when a suite floor (a
    # category not yet asked) could not be judged on that prefix: the bisect verdict is
    # the rule's, not the suite's.
    if measurement is None or measurement.partial or (outcome.status == "error"
                                                      and settled is None):
        reason = "; ".join(outcome.reasons) or "no measurement"
        return {**entry, "verdict": "skip", "reason": reason}
    return {**entry, "verdict": _verdict(settled), "reason": "",
            "accept_length": measurement.accept_length,
            "ci": list(measurement.accept_length_ci) if measurement.accept_length_ci else None,
            "stat": Statistic(**rule.last)}


_VERDICTS: tuple[Verdict, ...] = ("good", "bad", "skip", "undecided", "reference", "differs",
                                  "no difference")


def _verdict(settled: object) -> Verdict:
    """The rule's settled verdict as the journal types it (the rule writes only these)."""
    for verdict in _VERDICTS:
        if settled == verdict:
            return verdict
    raise EngineError(f"the bisect rule settled on {settled!r}, not a verdict it gives")
