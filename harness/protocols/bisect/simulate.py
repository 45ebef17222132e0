"""Synthetic per-prompt results of several builds on the same prompts, for the bisect's
tests and benchmark (nothing here is used by a real run).

Each prompt has a difficulty u_i (mean 1, shared by every build) and a verify-step
count s_i (shared); build b answers it with accept length a_ib = 1 + (A_b - 1) u_i and
numerator s_i + Poisson(s_i (a_ib - 1)), its own step-level noise. E[numerator] /
E[steps] = A_b exactly, and the builds' results on one prompt are correlated through u_i
and s_i, as paired runs are. With `diverge` = p, each build answers a fraction p of the
prompts as if they were new ones (its own u_i and s_i): a greedy answer that took
another path after a numerically different step (GPU batches are not bit-reproducible).
p = 1 removes the pairing altogether (the worst case for a paired test).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def simulate_builds(
    n: int, accept_lengths: Sequence[float], prompt_sd: float = 0.75,
    steps_range: tuple[int, int] = (20, 150), seed: int | np.random.Generator = 0,
    diverge: float = 0.0,
) -> list[tuple[np.ndarray, np.ndarray]]:
    """[(numerators, steps)] of each build in `accept_lengths`, on the same n prompts."""
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    if min(accept_lengths) <= 1.0:
        raise ValueError("accept lengths must exceed 1")
    shape = ((accept_lengths[0] - 1.0) / prompt_sd) ** 2
    shared_difficulty = rng.gamma(shape, 1.0 / shape, size=n)
    shared_steps = rng.integers(steps_range[0], steps_range[1] + 1, size=n)
    builds = []
    for accept in accept_lengths:
        own = rng.random(n) < diverge
        difficulty = np.where(own, rng.gamma(shape, 1.0 / shape, size=n), shared_difficulty)
        steps = np.where(own, rng.integers(steps_range[0], steps_range[1] + 1, size=n),
                         shared_steps)
        per_prompt = 1.0 + (accept - 1.0) * difficulty
        tokens = steps + rng.poisson(steps * (per_prompt - 1.0))
        builds.append((tokens.astype(np.int64), steps.astype(np.int64)))
    return builds
