"""`--sequential` (and bisect) with every floor: stratified waves, and a rule that settles
every floor the verdict uses before it stops.

Waves: prompts of a workload with several categories go out in a seeded, stratified
order (`stratified_order`), so every prefix the rule looks at holds each category in
proportion (Spec-Bench's file order put MT-Bench's 80 questions first: a wave of 50 saw
nothing else). A single-category workload (GSM8K) keeps its order.

Rule (`FloorsRule`): at an early look each floor of `metrics.floor_checks.floor_checks` (the
list the judge checks, so the keys of `decisions` are the judge's) is tested on its own, on
its sample (`FloorCheck.sample`) by its statistic (`FloorCheck.statistic`), at the accept-length
rule's thresholds (K early looks, Bonferroni: `stopping.SequentialRule.critical_values`):
- accept length, overall and per floored category: the skew-corrected t of
  tokens_i - floor * steps_i over questions (`stopping.SequentialRule`);
- a draft position k: the same statistic on (steps accepting >= k drafts, steps);
- accuracy, overall and per category: the score statistic (p - floor) / sqrt(floor (1 -
  floor) / n) over graded questions (defined at 0 and 1 correct alike).
A floor with fewer than `MIN_GROUP` questions at a look stays open. The run stops early
with "fail" as soon as any floor settles below (a failed floor stands), and with "pass"
only when every floor settles above; else it keeps sending. Error rates, per floor: P(an
early "fail" of a floor | that floor is met) <= alpha and P(an early "pass" of a floor |
it is not met) <= beta; so P(an early fail of a build meeting all F floors) <= F alpha and
P(an early pass of a build missing any floor) <= beta (`harness power` prints both).

With `--against` the same rule also carries the paired gate's rule (`paired`, a
`pairing._PairedStop` over `paired_gate.PairedRule`, alpha spent over the looks): the
run stops early with "fail" when a floor settles below or the gate finds B worse, and
with "pass" only when every floor settles above AND the gate finds B not worse. So no
floor is ever judged on a prefix the gate alone chose (issue 27, case 1). At the last
look the floors get the fixed protocol's verdict and the gate its last boundary.

The driver's interface (`harness.run.drive.StopRule`) is unchanged: `looks(max_n)` and
`decide_rows(rows) -> "pass" | "fail" | None` (at the last look also "inconclusive",
when every floor passed and the gate did not settle).
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from harness.metrics.breakdown import question_pairs
from harness.metrics.floor_checks import (
    ACCEPT_LENGTH,
    FloorCheck,
    GradedSample,
    NoEarlySample,
    floor_checks,
)
from harness.metrics.stopping import SequentialRule, skew_corrected_z

if TYPE_CHECKING:
    from harness.metrics.definitions import RequestLike
    from harness.results.record import RequestRow
    from harness.run.outcome import CallersRule, RunOptions
    from harness.suite.entries import Floors
    from harness.suite.model import Suite
    from harness.workloads import Prompt

MIN_GROUP = 20  # questions a floor needs at a look before it may settle (the t approximation)


def stratified_order(prompts: Sequence[Prompt], seed: int) -> list[Prompt]:
    """The prompts reordered so that every prefix holds each category in proportion:
    within a category a seeded shuffle, across categories the largest-remainder
    interleaving (the category furthest behind its share goes next). One category: as is."""
    groups: dict[str, list[Prompt]] = {}
    for prompt in prompts:
        groups.setdefault(str(prompt.category), []).append(prompt)
    if len(groups) < 2:
        return list(prompts)
    draws = random.Random(seed)
    for members in groups.values():
        draws.shuffle(members)
    total = len(prompts)
    taken = dict.fromkeys(groups, 0)
    order: list[Prompt] = []
    for position in range(1, total + 1):
        name = max(groups, key=lambda g: (len(groups[g]) * position / total - taken[g],
                                          -list(groups).index(g)))
        order.append(groups[name][taken[name]])
        taken[name] += 1
    return order


@dataclass
class FloorsRule:
    """The runner's stop rule for `--sequential`: every floor the verdict uses."""

    rule: SequentialRule  # of the accept-length floor: its looks and thresholds
    metric: str
    floors: Floors
    decisions: dict[str, str | None] = field(default_factory=dict)  # floor -> at the stop
    # the paired gate's stop rule (`--against`), settled with the floors
    paired: CallersRule | None = None
    gate_decision: str | None = None  # its decision at the stop (not_worse/worse/...)

    def looks(self, max_n: int) -> list[int]:
        return list(self.rule.looks(max_n))

    def checks(self) -> list[FloorCheck]:
        """The floors the rule settles: the judge's list (`floor_checks`)."""
        return floor_checks(self.floors)

    def tested_floors(self) -> list[str]:
        """The floors the rule settles, by key (as `decisions` keys them)."""
        return [check.key for check in self.checks()]

    def decide_rows(self, rows: Sequence[RequestRow]) -> str | None:
        floors = self._floors_decision(rows)
        if self.paired is None:
            return floors
        self.gate_decision = self.paired.decide_rows(rows)
        last = self._questions(rows) >= self.rule.max_n
        if floors == "fail" or self.gate_decision == "worse":
            return "fail"
        if floors == "pass" and self.gate_decision == "not_worse":
            return "pass"
        return "inconclusive" if last else None

    def _questions(self, rows: Sequence[RequestLike]) -> int:
        return len(question_pairs(rows, self.metric)[0])

    def _floors_decision(self, rows: Sequence[RequestLike]) -> str | None:
        _, tokens, steps = question_pairs(rows, self.metric)
        n = len(tokens)
        if n >= self.rule.max_n or n not in self.rule.looks():
            # the last look: the accept length's fixed verdict; every other floor is
            # judged on its point estimate (the fixed protocol)
            self.decisions = {ACCEPT_LENGTH: self.rule.decide(tokens, steps)}
            return self.decisions[ACCEPT_LENGTH]
        self.decisions = {check.key: early_decision(self.rule, check, rows)
                          for check in self.checks()}
        found = list(self.decisions.values())
        if "fail" in found:
            return "fail"
        return "pass" if all(d == "pass" for d in found) else None


def early_decision(rule: SequentialRule, check: FloorCheck, rows: Sequence[RequestLike]
                   ) -> str | None:
    """A floor at an early look: its statistic on its sample (`check.sample`) at the
    thresholds `rule.critical_values` gives for the sample's size; None (open) below
    `MIN_GROUP` questions."""
    sample = check.sample(rows)
    if isinstance(sample, NoEarlySample):
        return None  # its figure comes after the run: open until the last look
    if isinstance(sample, GradedSample):
        return _score(rule, sample.correct, check.floor)
    return _ratio(rule, sample.tokens, sample.steps, check.floor)


def _score(rule: SequentialRule, correct: Sequence[bool], floor: float) -> str | None:
    """An accuracy floor at an early look: the score statistic over graded requests."""
    n = len(correct)
    if n < MIN_GROUP or not 0.0 < floor < 1.0:
        return None
    fail_at, pass_at = rule.critical_values(n)
    share = sum(1 for mark in correct if mark) / n
    z = (share - floor) / math.sqrt(floor * (1.0 - floor) / n)
    return "fail" if z < -fail_at else "pass" if z > pass_at else None


def _ratio(rule: SequentialRule, tokens: Sequence[float], steps: Sequence[int], floor: float
           ) -> str | None:
    """A ratio floor at an early look: the skew-corrected t of tokens_i - floor steps_i
    over the group's questions, at the thresholds for its own size."""
    import numpy as np

    if len(tokens) < MIN_GROUP or sum(steps) <= 0:
        return None
    fail_at, pass_at = rule.critical_values(len(tokens))
    excess = np.asarray(tokens, dtype=float) - floor * np.asarray(steps, dtype=float)
    z = float(skew_corrected_z(excess))
    return "fail" if z < -fail_at else "pass" if z > pass_at else None


def stop_rule(suite: Suite, max_n: int) -> FloorsRule:
    """`max_n`: the questions the workload plans (the rule looks at question counts);
    the rule settles every floor of the suite (`harness.run.sequential`)."""
    floors = suite.floors
    rule = SequentialRule(floor=floors.accept_length, alpha=floors.alpha,
                          beta=floors.beta, max_n=max_n, strict=floors.strict)
    return FloorsRule(rule, floors.metric, floors)


def sequential_rule(suite: Suite, options: RunOptions, max_n: int
                    ) -> CallersRule | FloorsRule | None:
    """The stop rule of a run (`options`: its RunOptions): the caller's (bisect), or with
    --sequential the floors' rule, carrying the paired gate's with --against (B stops only
    when every floor and the gate have settled); None for a fixed run."""
    if options.stop_rule is not None:
        return options.stop_rule
    if not options.sequential:
        return None
    rule = stop_rule(suite, max_n)
    if options.pairing is not None:
        rule.paired = options.pairing.stop_rule(suite, max_n)
    return rule


def sequential_saving_note(concurrency: int, questions: int,
                           sequential_in_flight: int | None = None) -> str | None:
    """Where --sequential cannot save wall time, the run says so: a look waits for every
    question before it, so with every slot kept busy the first `concurrency` questions run
    whatever the rule decides and a stop saves only what the fixed protocol runs after
    them. With workload.sequential_in_flight set, the look's questions get the engine
    (harness.run.dispatch): no note."""
    if sequential_in_flight is not None:
        return None
    knob = ("; on an engine whose step time grows with its batch, workload."
            "sequential_in_flight gives a look's requests the engine (README, --sequential)")
    if concurrency >= questions:
        return (f"note: --sequential saves no wall time here: concurrency {concurrency} sends "
                f"all {questions} questions at once, so a stop only cancels requests already "
                f"running (it saves tokens){knob}")
    if 2 * concurrency > questions:
        return (f"note: --sequential saves little wall time here: at concurrency "
                f"{concurrency} the {questions} questions take under two rounds, and the "
                "first look waits for the first round's slowest request; it saves tokens "
                f"(benchmarks/bench_sequential.py){knob}")
    return None


def rule_settings(suite: Suite, max_n: int, used: CallersRule | FloorsRule | None = None
                  ) -> dict[str, object]:
    """The rule's settings as the record keeps them (`measurement.sequential`)."""
    floors, rule = suite.floors, stop_rule(suite, max_n)
    settings: dict[str, object] = {
        "alpha": floors.alpha, "beta": floors.beta, "floor": floors.accept_length,
        "metric": floors.metric, "wave": rule.rule.wave, "settles": rule.tested_floors()}
    if isinstance(used, FloorsRule) and used.paired is not None:  # --against: the gate
        settings["settles"] = [*rule.tested_floors(), "paired gate"]  # settles with floors
        settings["gate"] = {**used.paired.settings(), "decision": used.gate_decision}
    return settings
