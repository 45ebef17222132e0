"""Simulated runs of known truth through the runner's own rule and judge (no server):
per-question rows from chosen accept lengths, accuracy and position rates, replayed look
by look as the driver does (`sequential.sequential_rule`), then judged as the runner judges
(`judge.judge_entry`, i.e. `harness.run.judge.decide`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from harness.metrics.measure import summarise
from harness.protocols import pairing
from harness.results.record import RequestRow
from harness.run.judge import judge_entry
from harness.run.runner import RunOptions
from harness.run.sequential import sequential_rule
from harness.suite.gate import Gate
from harness.suite.model import Floors, load_suite

BASE = load_suite("tiny_dflash_cpu").suite


@dataclass(frozen=True)
class Truth:
    """A build's true figures: accept length overall (`accept`), of category "math"
    (`math`, else the same), accuracy and P(position 1 accepted)."""

    accept: float = 4.0
    math: float | None = None
    accuracy: float = 0.9
    position1: float = 0.9


def rows_of(truth: Truth, n: int, seed: int, sd: float = 0.6,
            shared: np.ndarray | None = None) -> list[RequestRow]:
    """n questions (alternating categories "math" and "chat"); per question an accept
    length truth + N(0, sd) (`shared`: the same per-question deviations as another build,
    i.e. a paired build), 40 verify steps; a histogram with P(position 1) = position1."""
    rng = np.random.default_rng(seed)
    noise = shared if shared is not None else rng.normal(0.0, sd, n)
    out = []
    for q in range(n):
        category = "math" if q % 2 == 0 else "chat"
        mean = truth.math if (category == "math" and truth.math is not None) else truth.accept
        steps = 40
        drafts = max(0, round((mean + noise[q] - 1.0) * steps))
        accepting = max(1, round(truth.position1 * steps))
        base, extra = divmod(drafts, accepting)  # `extra` steps accept base + 1 drafts
        histogram = [0] * (base + 2)
        histogram[0] += steps - accepting
        histogram[base] += accepting - extra
        histogram[base + 1] += extra
        while len(histogram) > 1 and histogram[-1] == 0:
            histogram.pop()
        tokens = steps + drafts
        correct = bool(rng.random() < truth.accuracy)
        out.append(RequestRow(index=q, question_index=q, category=category,
                              completion_tokens=tokens, verify_steps=steps,
                              correct_drafts=drafts, spec_accept_length=tokens / steps,
                              accept_histogram=histogram, latency_s=1.0, correct=correct))
    return out


def suite_with(floors: Floors, gate: Gate | None = None) -> Any:
    return BASE.model_copy(update={"floors": floors, "gate": gate})


def reference_of(rows: Sequence[RequestRow], series: str, reused: bool = False
                 ) -> pairing.Reference:
    from harness.metrics.breakdown import question_pairs

    keys, tokens, steps = question_pairs(rows, "server_avg")
    return pairing.Reference(series, Path("/nonexistent/a"), "run-a", "reference:a", reused,
                             {k: (t, s) for k, t, s in zip(keys, tokens, steps, strict=True)})


def replay(suite: Any, rows: Sequence[RequestRow], sequential: bool,
           reference: pairing.Reference | None = None, partial_at: int | None = None,
           contract: Sequence[str] = (), enforce_contract: bool = True,
           paired_without_reference: bool = False) -> tuple[Any, int]:
    """(the judge's Judgement, questions sent) of B's run on `rows`, as the runner
    forms it: the rule looks after each wave, stops when it settles, and the entry is
    judged on the rows sent. `partial_at`: the run died after that many questions;
    `paired_without_reference`: --against, but A measured nothing for this series."""
    gate = suite.gate or Gate(relative_drop=0.02)
    judge = (pairing.PairedJudge(gate, {suite.name: reference}) if reference
             else pairing.PairedJudge(gate, {}) if paired_without_reference else None)
    options = RunOptions(results_dir=Path("/nonexistent"), sequential=sequential,
                         pairing=judge, enforce_contract=enforce_contract)
    n = len(rows)
    rule = sequential_rule(suite, options, n)
    used = list(rows)
    if rule is not None:
        for look in rule.looks(n):
            if partial_at is not None and look > partial_at:
                break
            if look < n and rule.decide_rows(list(rows[:look])) is not None:
                used = list(rows[:look])
                break
        else:
            rule.decide_rows(list(rows))
    partial = partial_at is not None and partial_at < len(used)
    if partial:
        used = list(rows[:partial_at])
    measurement = summarise(used, suite.floors.metric, 1.0, None, planned=n, partial=partial)
    measurement.stopped_early = len(used) < n and not partial
    return judge_entry(suite, options, measurement, used, rule, contract), len(used)
