"""Step detection over a suite's nightly history of accept length.

Accept length moves in steps (a config default flips, a kernel changes), not in
drifts, and each night's figure comes with a bootstrap CI. The detector is
binary segmentation with a weighted two-sample z statistic:

* each run i has a standard error s_i from its CI (half-width / z of its level);
* nights also differ by more than their CIs say (server warm-up, data order), so an
  excess variance tau^2 is estimated robustly from the median absolute successive
  difference (a single step barely moves a median) and added: var_i = s_i^2 + tau^2;
* for every split k leaving >= `min_segment` runs on each side, z_k is the
  difference of the inverse-variance weighted means of both sides over its standard
  error; the largest |z_k| is a step when it passes a Bonferroni threshold for the
  number of candidate splits (family-wise false-alarm rate <= alpha per history)
  and the shift is at least `min_shift` (statistically clear but practically nil
  shifts are not alarms); both sides are then searched again.

This is the CUSUM change-point test on standardized values with known
heteroscedastic variances, written as segment means so each step carries its
before/after levels. A drop alarms while it is open: the latest segment is still at
least `min_shift` under the level before the drop. Only runs of the latest suite
document (`suite_sha256`) form a history, so editing a suite on purpose starts afresh;
the build under test is no part of that document (`harness.run.plan.choose_build`), so a
history spans builds and a step between two of them is found. Only the last `window`
runs are looked at, so an accepted drop ages out. Runs that errored or are partial stay
out of the history (`TrendParams.include_incomplete` brings them in, marked).
Kept over ruptures and apache-otava after `benchmarks/bench_trend.py` (docs/nightly-ci.md).

Nights that asked the same questions (one prompt set and data hash) are compared by
question instead (`harness.analysis.trend_questions` decides and says why):
the question draw is common to every night and cancels between nights, so each night's
error is the engine's, measured from the runs by pairing successive nights question by
question (`harness.metrics.night_noise`), not its CI over questions
(`detect_by_question`; docs/statistics.md "Trend by question").
The nightly summary table is `harness.analysis.trend_report`.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from statistics import NormalDist

import numpy as np
import pandas as pd

from harness.analysis.trend_questions import BY_CI, Comparison, compare_nights
from harness.metrics import stats
from harness.metrics.night_noise import NightNoise

_NORMAL = NormalDist()


@dataclass(frozen=True)
class TrendParams:
    alpha: float = 0.01  # family-wise false-alarm probability per history and search
    min_segment: int = 3  # runs on each side of a step
    min_shift: float = 0.1  # accept-length units
    window: int = 60  # most recent runs considered
    clip_sd: float = 3.0  # winsorize at this many SDs from the running median (0: off)
    # Runs that errored or ended before their plan (a server that died keeps a partial
    # figure) stay out of the history unless asked for; then they are marked `incomplete`.
    include_incomplete: bool = False
    # Nights that asked the same questions are compared by question (trend_questions);
    # False: always by each night's CI over questions.
    by_question: bool = True


@dataclass(frozen=True)
class Step:
    index: int  # position (in the history) of the first run after the step
    at: datetime | None
    before: float  # weighted mean level of the segment before
    after: float
    z: float

    @property
    def delta(self) -> float:
        return self.after - self.before

    @property
    def is_drop(self) -> bool:
        return self.delta < 0


@dataclass(frozen=True)
class Trend:
    suite: str
    n_runs: int
    steps: list[Step] = field(default_factory=list)
    excess_sd: float = 0.0
    open_drop: Step | None = None  # the drop that raises the alarm
    judged_by: str = BY_CI  # which comparison judged (trend_questions)
    comparison: str = ""  # what it compared, on what
    notes: tuple[str, ...] = ()  # what kept it from, or narrowed, the by-question one

    @property
    def alarm(self) -> bool:
        return self.open_drop is not None

    def describe(self) -> str:
        if self.n_runs < 2:
            return "too few runs"
        if self.open_drop is not None:
            step = self.open_drop
            when = step.at.date().isoformat() if step.at else f"run {step.index}"
            # identical answers within each build: the engine's noise is 0 and z unbounded
            z = (f"{step.z:.1f}" if abs(step.z) < 1000
                 else "< -1000" if step.z < 0 else "> 1000")
            return f"drop {step.delta:+.2f} since {when} (z {z}, {self.judged_by})"
        if self.steps:
            return f"no open drop ({len(self.steps)} step(s) in history, {self.judged_by})"
        return f"stable ({self.judged_by})"


def standard_errors(
    low: np.ndarray, high: np.ndarray, level: np.ndarray | float = 0.95
) -> np.ndarray:
    """Per-run standard error from its CI; NaN where the CI is missing."""
    z = np.vectorize(lambda p: _NORMAL.inv_cdf(0.5 + p / 2))(np.asarray(level, dtype=float))
    errors: np.ndarray = (np.asarray(high, float) - np.asarray(low, float)) / (2 * z)
    return errors


def excess_variance(values: np.ndarray, se: np.ndarray, centred: bool = True) -> float:
    """Night-to-night variance beyond the CIs, from the median successive difference.

    For independent nights var(x[i+1] - x[i]) = se[i]^2 + se[i+1]^2 + 2 tau^2; the
    median keeps a step (one large difference) from inflating the estimate. `centred`
    False: the differences are taken about 0, their mean when no step lies between
    nights (by question, where a few nights must not shrink tau by centring them).
    """
    if len(values) < 3:
        return 0.0
    diffs = np.diff(values)
    centre = float(np.median(diffs)) if centred else 0.0
    mad = 1.4826 * float(np.median(np.abs(diffs - centre)))
    pair = se[1:] ** 2 + se[:-1] ** 2
    return max(0.0, (mad**2 - float(np.median(pair))) / 2)


def winsorize(
    values: np.ndarray, sd: np.ndarray, clip_sd: float, half_width: int = 2
) -> np.ndarray:
    """Pull each value to within `clip_sd` SDs of the running median around it.

    A lone wild night (heavy tails: a throttled GPU, a noisy neighbour) then weighs as
    a 3-sigma night, not a 7-sigma one; a real step moves the running median within a
    couple of nights and is kept.
    """
    if not clip_sd or len(values) < 3:
        return values
    values = np.asarray(values, dtype=float)
    n, width = len(values), 2 * half_width + 1
    medians = np.empty(n)
    if n >= width:
        medians[half_width : n - half_width] = np.median(
            np.lib.stride_tricks.sliding_window_view(values, width), axis=1)
    for i in [*range(min(half_width, n)), *range(max(half_width, n - half_width), n)]:
        medians[i] = statistics.median(values[max(0, i - half_width) : i + half_width + 1])
    clipped: np.ndarray = np.clip(values, medians - clip_sd * sd, medians + clip_sd * sd)
    return clipped


def _best_split(values: np.ndarray, var: np.ndarray, min_segment: int) -> tuple[int, float]:
    """The split with the largest |z| within values (index of the first run after)."""
    weights = 1.0 / var
    cum_w = np.cumsum(weights)
    cum_wx = np.cumsum(weights * values)
    k = np.arange(min_segment, len(values) - min_segment + 1)
    if k.size == 0:
        return -1, 0.0
    w_left = cum_w[k - 1]
    w_right = cum_w[-1] - w_left
    mean_left = cum_wx[k - 1] / w_left
    mean_right = (cum_wx[-1] - cum_wx[k - 1]) / w_right
    z = (mean_right - mean_left) / np.sqrt(1 / w_left + 1 / w_right)
    best = int(np.argmax(np.abs(z)))  # the first of equal maxima
    if z[best] == 0:
        return -1, 0.0
    return int(k[best]), float(z[best])


def _weighted_mean(values: np.ndarray, var: np.ndarray) -> float:
    weights = 1.0 / var
    return float(np.sum(weights * values) / np.sum(weights))


def detect_steps(
    values: Sequence[float] | np.ndarray,
    se: Sequence[float] | np.ndarray,
    params: TrendParams = TrendParams(),
    times: Sequence[datetime | None] | None = None,
    df: int | None = None,
) -> tuple[list[Step], float]:
    """Steps in a history (oldest first) and the excess night-to-night SD used. `df`: the
    standard errors are estimates on `df` degrees of freedom (by question: the questions
    less one, as the paired gate's t), so the threshold is Student's t, not the normal."""
    x = np.asarray(values, dtype=float)
    s = np.asarray(se, dtype=float)
    known = np.isfinite(s) & (s > 0)
    # a run without a CI gets the typical CI of the others (or, failing that, only tau)
    s = np.where(known, s, float(np.median(s[known])) if known.any() else 0.0)
    tau2 = excess_variance(x, s, centred=not df)
    var = s**2 + tau2
    if not np.all(var > 0):
        var = np.maximum(var, 1e-12)  # identical figures with no CI: any change is a step
    x = winsorize(x, np.sqrt(var), params.clip_sd)
    steps: list[Step] = []
    pending = [(0, len(x))]
    while pending:
        lo, hi = pending.pop()
        n_candidates = hi - lo - 2 * params.min_segment + 1
        if n_candidates < 1:
            continue
        k, z = _best_split(x[lo:hi], var[lo:hi], params.min_segment)
        if k < 0:
            continue  # a flat segment: nothing to split
        tail = 1 - params.alpha / (2 * n_candidates)
        threshold = stats.t_quantile(tail, df) if df else _NORMAL.inv_cdf(tail)
        before = _weighted_mean(x[lo : lo + k], var[lo : lo + k])
        after = _weighted_mean(x[lo + k : hi], var[lo + k : hi])
        if abs(z) < threshold or abs(after - before) < params.min_shift:
            continue
        at = times[lo + k] if times is not None else None
        steps.append(Step(index=lo + k, at=at, before=before, after=after, z=z))
        pending += [(lo, lo + k), (lo + k, hi)]
    steps.sort(key=lambda step: step.index)
    # levels next to each step from the final segmentation, not the search's wider sides
    edges = [0, *(step.index for step in steps), len(x)]
    levels = [_weighted_mean(x[a:b], var[a:b]) for a, b in itertools.pairwise(edges)]
    steps = [
        Step(step.index, step.at, levels[i], levels[i + 1], step.z) for i, step in enumerate(steps)
    ]
    return steps, math.sqrt(tau2)


def detect_by_question(noise: NightNoise, params: TrendParams = TrendParams(),
                       times: Sequence[datetime | None] | None = None
                       ) -> tuple[list[Step], float]:
    """Steps in nights that asked the same questions: the question draw is common to every
    night and cancels, so each night's error is the engine's (by question, on
    `questions - 1` degrees of freedom) plus what the successive differences show beyond
    it (the host), not its CI over questions."""
    return detect_steps(noise.figures, [noise.engine_se] * len(noise.figures), params, times,
                        df=noise.questions - 1)


def open_drop(steps: Sequence[Step], min_shift: float) -> Step | None:
    """The earliest drop whose loss the latest segment has not recovered."""
    if not steps:
        return None
    latest = steps[-1].after
    for step in steps:
        if step.is_drop and latest <= step.before - min_shift:
            return step
    return None


def incomplete(rows: pd.DataFrame) -> pd.Series:
    """True for a run whose verdict is an error or that ended before its plan (partial):
    its figure, if any, is not a night's measurement of the build."""
    verdict = rows["verdict"] if "verdict" in rows else pd.Series("", index=rows.index)
    partial = rows["partial"] if "partial" in rows else pd.Series(False, index=rows.index)
    return (verdict == "error") | (partial.astype("boolean").fillna(False).astype(bool))


def suite_history(runs: pd.DataFrame, suite: str, window: int | None = 60,
                  include_incomplete: bool = False) -> pd.DataFrame:
    """The suite's measured runs (kind "run"), oldest first, of its latest suite document.
    Errored and partial runs are left out unless `include_incomplete`; the column
    `incomplete` marks them then."""
    rows = runs[(runs["suite"] == suite) & (runs["kind"].fillna("run") == "run")]
    rows = rows.dropna(subset=["accept_length"]).sort_values("started_at", kind="stable")
    marked = incomplete(rows)
    rows = rows.assign(incomplete=marked) if include_incomplete else rows[~marked]
    if "suite_sha256" in rows and len(rows) and rows["suite_sha256"].notna().any():
        latest = rows["suite_sha256"].dropna().iloc[-1]
        rows = rows[rows["suite_sha256"] == latest]
    if window:
        rows = rows.tail(window)
    return rows.reset_index(drop=True)


def history_errors(history: pd.DataFrame) -> np.ndarray:
    level = history["ci_level"].fillna(0.95) if "ci_level" in history else 0.95
    return standard_errors(
        history["ci_low"].to_numpy(dtype=float),
        history["ci_high"].to_numpy(dtype=float),
        np.asarray(level, dtype=float),
    )


def analyse(history: pd.DataFrame, suite: str, params: TrendParams = TrendParams()) -> Trend:
    """Steps and alarm for one suite's history (see `suite_history`)."""
    if len(history) < 2:
        return Trend(suite=suite, n_runs=len(history))
    times = [_as_datetime(t) for t in history["started_at"]]
    comparison = (compare_nights(history) if params.by_question
                  else Comparison(BY_CI, f"{BY_CI}: asked for (--by-ci)"))
    if comparison.noise is not None:
        steps, excess_sd = detect_by_question(comparison.noise, params, times)
    else:
        steps, excess_sd = detect_steps(history["accept_length"].to_numpy(dtype=float),
                                        history_errors(history), params, times)
    return Trend(
        suite=suite,
        n_runs=len(history),
        steps=steps,
        excess_sd=excess_sd,
        open_drop=open_drop(steps, params.min_shift),
        judged_by=comparison.judged_by,
        comparison=comparison.detail,
        notes=comparison.notes,
    )


def _as_datetime(value: object) -> datetime | None:
    """A frame's `started_at` cell (a pandas Timestamp) as a datetime."""
    if value is None:
        return None
    to_pydatetime = getattr(value, "to_pydatetime", None)
    moment = to_pydatetime() if to_pydatetime else value
    return moment if isinstance(moment, datetime) else None


def analyse_all(
    runs: pd.DataFrame, suites: Sequence[str] | None = None, params: TrendParams = TrendParams()
) -> dict[str, Trend]:
    names = list(suites) if suites else sorted(runs.loc[runs["kind"] == "run", "suite"].unique())
    return {name: analyse(suite_history(runs, name, params.window, params.include_incomplete),
                          name, params) for name in names}
