"""Group-sequential boundaries from an alpha-spending function (Lan and DeMets 1983).

A test looked at K times, at information fractions 0 < t_1 < ... < t_K = 1 (here the
share of the planned questions answered), stops at look k when its z statistic crosses
c_k. Lan-DeMets spending chooses each c_k so that the probability of a first crossing at
look k, under the null, is alpha(t_k) - alpha(t_{k-1}); the crossing probability over
all looks is then exactly alpha(1) = alpha, however many looks there are. Spending
functions:

- "obrien_fleming": alpha(t) = 2 - 2 Phi(z_{1 - alpha/2} / sqrt(t)) (O'Brien-Fleming
  type: almost nothing spent early, the last look close to the fixed test's threshold);
- "pocock": alpha(t) = alpha ln(1 + (e - 1) t) (Pocock type: spent evenly).

The joint law of the z statistics under the null is that of a Brownian motion W(t)
looked at the t_k (Z_k = W(t_k) / sqrt(t_k)); the first-crossing probabilities are
computed by numerical integration of W's density over the continuation region, look by
look (Armitage, McPherson and Rowe 1969; Jennison and Turnbull 2000, ch. 19). scipy has
no group-sequential design, so the recursion is here; the normal tail in it is scipy's
(scipy.special.ndtr) and each boundary is found by scipy.optimize.brentq. Each one-sided
boundary is computed ignoring any boundary on the other side (non-binding): stopping the
other way only removes crossings, so each side's rate stays <= alpha.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from functools import lru_cache
from statistics import NormalDist
from typing import Any

SPENDING = ("obrien_fleming", "pocock")
GRID = 1201  # points of the integration grid on W's continuation region
LOW = -10.0  # W below LOW sqrt(t) carries no mass worth counting


_NORMAL = NormalDist()


def _sf(x: Any) -> Any:
    """1 - Phi(x), elementwise: scipy.special.ndtr, which scipy.stats.norm.sf evaluates;
    called directly, as the root finder calls it a dozen times a boundary and norm.sf's
    argument handling makes it several times as slow (`python benchmarks/bench_stats.py`)."""
    import numpy as np
    from scipy.special import ndtr

    return ndtr(-np.asarray(x, dtype=float))


def _root(f: Callable[[float], float], low: float, high: float) -> float:
    """The root of f on [low, high], where f's signs differ (Brent's method)."""
    from scipy.optimize import brentq

    return float(brentq(f, low, high, xtol=1e-10))


def spent(t: float, alpha: float, kind: str) -> float:
    """alpha(t): the error rate spent by information fraction t."""
    if t <= 0:
        return 0.0
    if t >= 1:
        return alpha
    if kind == "obrien_fleming":
        return 2.0 - 2.0 * _NORMAL.cdf(_NORMAL.inv_cdf(1.0 - alpha / 2.0) / math.sqrt(t))
    if kind == "pocock":
        return alpha * math.log(1.0 + (math.e - 1.0) * t)
    raise ValueError(f"unknown spending function {kind!r} (known: {', '.join(SPENDING)})")


def boundaries(fractions: Sequence[float], alpha: float, kind: str = "obrien_fleming"
               ) -> list[float]:
    """The z boundaries c_1..c_K for looks at `fractions` (increasing, the last 1)."""
    return list(_boundaries(tuple(float(t) for t in fractions), float(alpha), kind))


@lru_cache(maxsize=256)
def _boundaries(fractions: tuple[float, ...], alpha: float, kind: str) -> tuple[float, ...]:
    import numpy as np

    if not fractions or any(b <= a for a, b in itertools.pairwise(fractions)) \
            or fractions[0] <= 0 or abs(fractions[-1] - 1.0) > 1e-12:
        raise ValueError(f"information fractions must increase to 1, got {fractions}")
    if not 0.0 < alpha < 0.5:
        raise ValueError(f"alpha must be in (0, 0.5), got {alpha}")
    out: list[float] = []
    previous_t, previous_spent = 0.0, 0.0
    # W's sub-density on the continuation region (None before the first look)
    grid: np.ndarray | None = None
    weights: np.ndarray | None = None
    density: np.ndarray | None = None
    for t in fractions:
        target = spent(t, alpha, kind) - previous_spent
        if grid is None or weights is None or density is None:  # first look: W(t) ~ N(0, t)
            c = _NORMAL.inv_cdf(1.0 - target) if target > 0 else math.inf
        else:
            c = _next_boundary(grid, weights * density, previous_t, t, target)
        out.append(c)
        # the sub-density of W(t) on {no crossing so far}, on a grid below this boundary
        top = c * math.sqrt(t) if math.isfinite(c) else -LOW * math.sqrt(t)
        new_grid = np.linspace(LOW * math.sqrt(t), top, GRID)
        if grid is None or weights is None or density is None:
            new_density = _pdf(new_grid / math.sqrt(t)) / math.sqrt(t)
        else:
            step = math.sqrt(t - previous_t)
            kernel = _pdf((new_grid[:, None] - grid[None, :]) / step) / step
            new_density = kernel @ (weights * density)
        grid, density = new_grid, new_density
        weights = np.full(GRID, (grid[-1] - grid[0]) / (GRID - 1))
        weights[0] = weights[-1] = weights[0] / 2.0  # the trapezoid rule
        previous_t, previous_spent = t, spent(t, alpha, kind)
    return tuple(out)


def _next_boundary(grid: Any, mass: Any, previous_t: float, t: float, target: float
                   ) -> float:
    """c such that P(no crossing before, W(t) > c sqrt(t)) = target, given W(previous_t)'s
    sub-density times the quadrature weights (`mass`) on `grid`."""
    import numpy as np

    step = math.sqrt(t - previous_t)

    def excess(c: float) -> float:
        return float(np.sum(mass * _sf((c * math.sqrt(t) - grid) / step))) - target

    if target <= 0:
        return math.inf
    if excess(0.0) <= 0:  # would need c <= 0: never in practice
        return 0.0
    return _root(excess, 0.0, -LOW)


def nominal_alphas(fractions: Sequence[float], alpha: float, kind: str = "obrien_fleming"
                   ) -> list[float]:
    """Each look's one-sided nominal level 1 - Phi(c_k): a test at look k at this level
    crosses exactly when the z statistic crosses c_k."""
    return [1.0 - _NORMAL.cdf(c) if math.isfinite(c) else 0.0
            for c in boundaries(fractions, alpha, kind)]


def _pdf(x: Any) -> Any:
    """The standard normal density, elementwise: its definition, kept rather than
    scipy.stats.norm.pdf, which gives the same figures but takes two to four times as long
    on the grid x grid kernel of each look (`python benchmarks/bench_stats.py`)."""
    import numpy as np

    return np.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)
