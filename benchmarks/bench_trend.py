"""Change-point detection on synthetic nightly histories: harness.analysis.trend vs
maintained libraries.

Histories come from `harness.analysis.simulate.simulate_history` (reference-engine-like
nights: level 1.6-2.0, 95% CI half-width 0.05-0.1, 60 nights). Every detector's change
points go through the same alarm rule (`harness.analysis.trend.open_drop`, min shift 0.1),
so only detection differs:
- harness: binary segmentation with CI-weighted z and a Bonferroni threshold (alpha 0.01);
- ruptures KernelCPD (linear kernel = PELT with the l2 cost), penalty c * sigma^2 * ln(n),
  sigma from the median absolute successive difference (robust to one step), c = 2 and 4;
- apache-otava compute_change_points (E-Divisive means, Hunter's t-test variant, window 50,
  max p-value 0.001), on --otava-histories histories (it is slower).
Prints, per case, the alarm rate (a false alarm where no step was planted), the mean |error|
of the located night, and the time per history. --every-night runs the detector each night
on the history so far (nights 6..60) and prints how many histories alarm on some night, and
how soon a 0.3 drop alarms. Libraries are optional: install them into a folder and pass it:
    pip install --target /tmp/cpd ruptures apache-otava
    python benchmarks/bench_trend.py --libs /tmp/cpd [--every-night]
"""

from __future__ import annotations

import argparse
import itertools
import math
import sys
import time
from collections.abc import Callable

NIGHTS = 60
MIN_SHIFT = 0.1
CASES = (
    ("no step", {}),
    ("no step, excess night-to-night sd 0.03", {"excess_sd": 0.03}),
    ("no step, Student-t(3) noise", {"noise": "t3"}),
    ("0.3 drop at night 40", {"drop": 0.3, "at": 40}),
    ("0.3 drop at night 57", {"drop": 0.3, "at": 57}),
    ("0.15 drop at night 40", {"drop": 0.15, "at": 40}),
)
Detector = Callable[["object", "object"], list]  # (values, half-widths) -> steps


def harness_detector(values, half_width):  # type: ignore[no-untyped-def]
    from harness.analysis.trend import TrendParams, detect_steps

    return detect_steps(values, half_width / 1.96, TrendParams())[0]


def _steps_at(values, edges):  # type: ignore[no-untyped-def]
    from harness.analysis.trend import Step

    bounds = [0, *edges, len(values)]
    levels = [float(values[a:b].mean()) for a, b in itertools.pairwise(bounds)]
    return [Step(index=int(e), at=None, before=levels[i], after=levels[i + 1], z=math.nan)
            for i, e in enumerate(edges)]  # fmt: skip


def ruptures_detector(c: float) -> Detector:
    import numpy as np
    import ruptures

    def detect(values, half_width):  # type: ignore[no-untyped-def]
        sigma = 1.4826 * float(np.median(np.abs(np.diff(values)))) / math.sqrt(2)
        algo = ruptures.KernelCPD(kernel="linear", min_size=3).fit(values.reshape(-1, 1))
        edges = algo.predict(pen=c * sigma**2 * math.log(len(values)))[:-1]
        return _steps_at(values, edges)

    return detect


def otava_detector(values, half_width):  # type: ignore[no-untyped-def]
    from otava.analysis import compute_change_points

    points, _ = compute_change_points(list(values), window_len=50, max_pvalue=0.001)
    return _steps_at(values, sorted(int(p.index) for p in points))


def detectors(every: bool) -> dict[str, tuple[Detector, float]]:
    """name -> (detector, share of histories it runs on)."""
    found: dict[str, tuple[Detector, float]] = {"harness (binary segmentation)":
                                                (harness_detector, 1.0)}  # fmt: skip
    from importlib.metadata import version

    try:
        import ruptures  # noqa: F401

        for c in (2.0, 4.0):
            found[f"ruptures {version('ruptures')} KernelCPD pen {c:g}s^2ln n"] = (
                ruptures_detector(c), 1.0)
    except ImportError:
        print("ruptures: not installed (pass --libs DIR), skipped")
    try:
        import otava.analysis  # noqa: F401

        share = 0.2 if every else 0.3
        found[f"apache-otava {version('apache-otava')} E-Divisive"] = (otava_detector, share)
    except ImportError:
        print("apache-otava: not installed (pass --libs DIR), skipped")
    return found


def one_case(detect: Detector, kwargs: dict, histories: int) -> tuple[float, float, float]:
    """(alarm rate, mean |location error| of alarms where a step was planted, ms/history)."""
    from harness.analysis.simulate import simulate_history
    from harness.analysis.trend import open_drop

    alarms, errors, elapsed = 0, [], 0.0
    for seed in range(histories):
        values, half_width = simulate_history(seed, NIGHTS, **kwargs)
        began = time.perf_counter()
        drop = open_drop(detect(values, half_width), MIN_SHIFT)
        elapsed += time.perf_counter() - began
        alarms += drop is not None
        if drop is not None and "at" in kwargs:
            errors.append(abs(drop.index - kwargs["at"]))
    error = sum(errors) / len(errors) if errors else math.nan
    return alarms / histories, error, 1000 * elapsed / histories


def every_night(detect: Detector, kwargs: dict, histories: int) -> tuple[float, float]:
    """(share of histories alarming on some night, share alarming by 2 nights after `at`)."""
    from harness.analysis.simulate import simulate_history
    from harness.analysis.trend import open_drop

    some, soon = 0, 0
    for seed in range(histories):
        values, half_width = simulate_history(seed, NIGHTS, **kwargs)
        first = next((night for night in range(6, NIGHTS + 1)
                      if open_drop(detect(values[:night], half_width[:night]), MIN_SHIFT)),
                     None)  # fmt: skip
        some += first is not None
        # "by the 2nd night after": the history ends 2 nights after the drop's first night
        soon += first is not None and "at" in kwargs and first <= kwargs["at"] + 2
    return some / histories, soon / histories


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--libs", action="append", default=[], metavar="DIR",
                        help="folder with ruptures / apache-otava installed (appended to sys.path)")
    parser.add_argument("--histories", type=int, default=1000)
    parser.add_argument("--every-night", action="store_true",
                        help="run each detector every night instead (--histories default 100)")
    args = parser.parse_args(argv)
    sys.path.extend(args.libs)  # after site-packages: the project's numpy stays in front
    began = time.perf_counter()
    found = detectors(args.every_night)
    if args.every_night:
        histories = args.histories if args.histories != 1000 else 100
        print(f"every night 6..{NIGHTS} on the history so far, {histories} histories per case")
        print(f"{'detector':<44} {'case':<48} {'alarm on some night':>20} {'by 2nd night':>13}")
        for name, (detect, share) in found.items():
            n = max(20, int(histories * share))
            for case, kwargs in (CASES[0], CASES[1], CASES[2], CASES[3]):
                some, soon = every_night(detect, kwargs, n)
                late = f"{100 * soon:.1f}%" if "at" in kwargs else "-"
                print(f"{name:<44} {case:<48} {100 * some:>19.1f}% {late:>13}")
    else:
        print(f"{args.histories} histories of {NIGHTS} nights per case (seeds 0..)")
        print(f"{'detector':<44} {'case':<48} {'alarm':>7} {'|error|':>8} {'ms/hist':>8}")
        for name, (detect, share) in found.items():
            n = max(20, int(args.histories * share))
            for case, kwargs in CASES:
                rate, error, ms = one_case(detect, kwargs, n)
                where = "-" if math.isnan(error) else f"{error:.2f}"
                print(f"{name:<44} {case + f' (n={n})':<48} {100 * rate:>6.1f}% {where:>8} "
                      f"{ms:>8.2f}")  # fmt: skip
    print(f"{time.perf_counter() - began:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
