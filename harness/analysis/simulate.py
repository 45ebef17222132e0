"""Synthetic data with known truth, for tests and benchmarks: per-request rows, the
dispatch of a run under concurrency, and nightly accept-length histories.

Nothing here is used by a real run; it is how the statistics are checked.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from harness.metrics.stopping import SequentialRule, in_flight_limit

if TYPE_CHECKING:
    from harness.metrics.stats import Decision


def _rng(seed: int | np.random.Generator) -> np.random.Generator:
    return seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)


def simulate_prompts(
    n: int,
    accept_length: float,
    prompt_sd: float = 0.75,
    steps_range: tuple[int, int] = (20, 150),
    seed: int | np.random.Generator = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """Per-request (numerator, verify steps) with known truth.

    Each prompt gets its own accept length a_i = 1 + (accept_length - 1) * Gamma(k, 1/k)
    (mean accept_length, sd prompt_sd: the prompt-level variance of real runs), a
    verify-step count independent of a_i, and numerator = steps + Poisson(steps * (a_i - 1))
    (step-level noise). E[numerator] / E[steps] = accept_length exactly.
    """
    rng = _rng(seed)
    if accept_length <= 1.0:
        raise ValueError("accept_length must exceed 1")
    shape = ((accept_length - 1.0) / prompt_sd) ** 2
    per_prompt = 1.0 + (accept_length - 1.0) * rng.gamma(shape, 1.0 / shape, size=n)
    steps = rng.integers(steps_range[0], steps_range[1] + 1, size=n)
    tokens = steps + rng.poisson(steps * (per_prompt - 1.0))
    return tokens.astype(np.int64), steps.astype(np.int64)


# ------------------------------------------------------------------ dispatch under concurrency


def completion_times(
    latencies: Sequence[float], concurrency: int, start: float = 0.0
) -> list[float]:
    """When each request finishes if they are sent in order with <= `concurrency` in
    flight (a request starts when a slot frees)."""
    slots = [start] * min(concurrency, max(1, len(latencies)))
    heapq.heapify(slots)
    finished = []
    for latency in latencies:
        begin = heapq.heappop(slots)
        finished.append(begin + latency)
        heapq.heappush(slots, begin + latency)
    return finished


@dataclass(frozen=True)
class Replay:
    verdict: Decision
    requests: int  # requests the verdict is computed from
    tokens: float  # tokens generated, including those of requests cancelled in flight
    wall: float  # in units of one token's decode time


def replay_waves(
    rule: SequentialRule, tokens: Sequence[int], steps: Sequence[int], concurrency: int
) -> Replay:
    """The driver's protocol: send up to the next look (<= concurrency in flight), wait for
    all of it, decide. Latency of a request = its token count (one token per unit time)."""
    clock, sent = 0.0, 0
    for look in rule.looks():
        clock = max(completion_times(tokens[sent:look], concurrency, clock), default=clock)
        sent = look
        verdict = rule.decide(tokens[:look], steps[:look])
        if verdict is not None:
            return Replay(verdict, look, float(sum(tokens[:look])), clock)
    raise AssertionError("the last look always decides")  # pragma: no cover


def replay_pipelined(
    rule: SequentialRule, tokens: Sequence[int], steps: Sequence[int], concurrency: int,
    latencies: Sequence[float] | None = None,
) -> Replay:
    """The driver's protocol since issue 30 (continuous dispatch): keep every slot busy
    (send past the next look) and decide when a look's requests have all finished; requests
    still in flight then are cancelled, their tokens so far wasted. `latencies`: each
    request's time (default its token count; its verify steps model a GPU, where a request
    takes one forward pass per step), tokens made at a steady rate within it."""
    durations = list(tokens) if latencies is None else list(latencies)
    done = completion_times(durations, concurrency)
    for look in rule.looks():
        at = max(done[:look])
        verdict = rule.decide(tokens[:look], steps[:look])
        if verdict is not None:
            generated = sum(t * min(1.0, max(0.0, (at - (end - d)) / d)) if d > 0 else t
                            for t, d, end in zip(tokens, durations, done, strict=True))
            return Replay(verdict, look, generated, at)
    raise AssertionError("the last look always decides")  # pragma: no cover


def first_look_wall(
    rule: SequentialRule, latencies: Sequence[float], concurrency: int
) -> float:
    """The wall time of a rule that always settles at its first look, over the fixed
    protocol's (every request): the least any rule that waits for a look's requests can
    take under continuous dispatch, whatever its statistics. Long requests set it: the
    first look waits for the slowest of its requests, while the fixed protocol's later
    requests start as the short ones free their slots."""
    done = completion_times(latencies, concurrency)
    return max(done[: rule.looks()[0]]) / max(done)


def replay_batched(
    rule: SequentialRule | None, tokens: Sequence[int], steps: Sequence[int],
    concurrency: int, knee: float = math.inf, past_look: int | None = None,
    first_look: bool = False,
) -> Replay:
    """The driver's dispatch (`harness.run.dispatch`: prompts past the next look sent only
    while fewer than `past_look` run) on an engine whose step time grows with its batch,
    as a GPU's verify does once compute-bound: with k requests running, each advances
    1 / max(1, k / knee) verify steps per time unit (one unit: a step of a batch of at most
    `knee`). knee = inf: batch-independent steps (`replay_pipelined` with latency = steps).
    rule None: the fixed protocol (every request); `first_look`: settle at the first look
    whatever the rows (the bound no rule that waits for a look's requests can beat)."""
    n = len(steps)
    looks = [n] if rule is None else rule.looks()
    left: dict[int, float] = {}
    done: set[int] = set()
    clock, sent, prefix, pending = 0.0, 0, 0, list(looks)
    while True:
        while sent < n and len(left) < in_flight_limit(sent, pending[0] if pending else None,
                                                       concurrency, past_look):
            left[sent] = float(steps[sent])
            sent += 1
        first = min(left.values())
        clock += first * max(1.0, len(left) / knee)
        for index in list(left):
            left[index] -= first
            if left[index] <= 1e-9:
                del left[index]
                done.add(index)
        while prefix in done:
            prefix += 1
        while pending and pending[0] <= prefix:
            at = pending.pop(0)
            if rule is None:
                return Replay("pass", at, float(sum(tokens)), clock)
            verdict = "pass" if first_look else rule.decide(tokens[:at], steps[:at])
            if verdict is not None:
                generated = sum(tokens[i] for i in done) + sum(
                    tokens[i] * (1.0 - rest / steps[i]) for i, rest in left.items())
                return Replay(verdict, at, float(generated), clock)


# ------------------------------------------------------------------------ nightly histories


def simulate_history(
    seed: int | np.random.Generator,
    nights: int = 60,
    drop: float = 0.0,
    at: int = 40,
    noise: str = "normal",
    excess_sd: float = 0.0,
) -> tuple[np.ndarray, np.ndarray]:
    """(accept length, 95% CI half-width) per night, like the reference engine's nights:
    level U(1.6, 2.0), half-width U(0.05, 0.1), a step of -`drop` from night `at` on.

    noise "normal": each night's error is N(0, se^2), se = half-width / 1.96; "t3": se
    times a Student-t(3) variate scaled to unit variance (heavy tails); `excess_sd` adds
    N(0, excess_sd^2) night-to-night variation that the CIs do not show.
    """
    rng = _rng(seed)
    level = rng.uniform(1.6, 2.0)
    half_width = rng.uniform(0.05, 0.1, nights)
    se = half_width / 1.96
    if noise == "normal":
        errors = rng.normal(0.0, se)
    elif noise == "t3":
        errors = se * rng.standard_t(3, nights) / np.sqrt(3.0)
    else:
        raise ValueError(f"noise must be 'normal' or 't3', got {noise!r}")
    values = level + errors + (rng.normal(0.0, excess_sd, nights) if excess_sd else 0.0)
    values[at:] -= drop
    return values, half_width


def simulate_nights(
    seed: int | np.random.Generator,
    nights: int = 6,
    questions: int = 100,
    drop: float = 0.0,
    at: int = 3,
    accept_length: float = 3.0,
    prompt_sd: float = 0.75,
    engine_sd: float = 0.35,
    host_sd: float = 0.02,
    changed: float = 1.0,
    changed_nights: float = 1.0,
) -> tuple[np.ndarray, np.ndarray]:
    """(numerators, verify steps), each nights x questions: one prompt set asked every
    night by an engine that is not bit-reproducible.

    Question q has its own accept length a_q (`simulate_prompts`' Gamma, sd `prompt_sd`)
    and verify-step count, the same every night. Night i answers it at
    a_q + e_iq + h_i - `drop` (from night `at` on): e_iq ~ N(0, engine_sd^2) is the
    engine's nondeterminism per question and night (batch composition, kernels; with the
    Poisson noise of acceptance, a per-question sd of B - A near 0.55, the calibrated
    `paired_sd` of docs/statistics.md), h_i ~ N(0, host_sd^2) a shift of the whole night
    (the host), and numerator = steps + Poisson(steps * (a - 1)).

    `changed` or `changed_nights` < 1: an engine that is bit-reproducible but on some
    nights for some answers (real SGLang on CPU, greedy: docs/statistics.md, "Trend by
    question"): a night deviates with probability `changed_nights`, and on such a night
    each question is answered afresh as above with probability `changed`; every other
    answer is exactly the build's first night's (night 0, or night `at` after a drop).
    """
    rng = _rng(seed)
    tokens, steps = simulate_prompts(questions, accept_length, prompt_sd, seed=rng)
    per_question = 1.0 + (tokens - steps) / steps  # one draw of each question's level
    shift = np.zeros(nights)
    shift[at:] = drop
    level = (per_question[None, :] + rng.normal(0.0, engine_sd, (nights, questions))
             + rng.normal(0.0, host_sd, nights)[:, None] - shift[:, None])
    counts = np.broadcast_to(steps, (nights, questions))
    made = counts + rng.poisson(counts * np.clip(level - 1.0, 0.0, None))
    if changed < 1.0 or changed_nights < 1.0:
        first = np.where(shift != 0, min(at, nights - 1), 0)  # each night's build's first
        odd = rng.random(nights) < changed_nights
        fresh = odd[:, None] & (rng.random(made.shape) < changed)
        made = np.where(fresh, made, made[first])
    return made.astype(np.int64), np.array(counts, dtype=np.int64)
