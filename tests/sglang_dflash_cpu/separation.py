"""Can a bisect step separate a given paired difference on this engine? From a session's
GOOD and BAD records: the paired standard error at each look, and for the measured
difference and a relative one (default 3% of GOOD) the probability that a commit like BAD
settles "bad" at that look under the step rule (harness/protocols/bisect/rule.py: llr_n =
Δ (D_n - Δ/2) / se_n^2 against log((1 - alpha) / alpha); D_n ~ N(Δ, se_n), so it settles
when |D_n| >= |Δ|/2 + threshold se_n^2 / |Δ|). A commit like GOOD is the mirror image.
Looks past GOOD's prompt count use se_n extrapolated as 1 / sqrt(n).

    python -m tests.sglang_dflash_cpu.separation RESULTS [--relative 0.03] [--alpha 0.01]
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any


def _normal_cdf(x: float) -> float:
    return 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))


def separation(results: Path, relative: float = 0.03, alpha: float = 0.01,
               looks: tuple[int, ...] = (50, 100, 150, 200)) -> dict[str, Any]:
    from harness.protocols.bisect.rule import endpoint_difference
    from harness.protocols.bisect.session import load_session
    from harness.protocols.bisect.steps import read_reference

    session = load_session(results, None)  # the latest session there
    entries = {e["role"]: e for e in session.journal() if "role" in e}
    good = read_reference(Path(entries["good"]["run_dir"]), session.metric)
    bad = read_reference(Path(entries["bad"]["run_dir"]), session.metric)
    total = len(good.tokens)
    threshold = math.log((1 - alpha) / alpha)
    rows = []
    for n in looks:
        measured_n = min(n, total)
        diff = endpoint_difference((good.tokens[:measured_n], good.steps[:measured_n]),
                                   (bad.tokens[:measured_n], bad.steps[:measured_n]), alpha)
        se = diff.se * math.sqrt(measured_n / n)
        row: dict[str, Any] = {"n": n, "se": se, "extrapolated": n > total,
                               "difference": diff.estimate if n <= total else None}
        full = endpoint_difference(good.pairs, bad.pairs, alpha)
        good_figure = sum(good.tokens) / sum(good.steps)
        for name, effect in (("measured", full.estimate), ("relative", -relative * good_figure)):
            margin = abs(effect) / 2 - threshold * se**2 / abs(effect)
            row[name] = {"effect": effect, "expected_llr": effect**2 / (2 * se**2),
                         "p_settle": _normal_cdf(margin / se)}
        rows.append(row)
    return {"alpha": alpha, "threshold": threshold, "good_prompts": total,
            "relative": relative, "looks": rows}


def render(found: dict[str, Any]) -> list[str]:
    lines = [f"step rule: alpha {found['alpha']}, |llr| threshold {found['threshold']:.2f}; "
             f"GOOD on {found['good_prompts']} prompts"]
    for row in found["looks"]:
        m, r = row["measured"], row["relative"]
        lines.append(
            f"n={row['n']:>3} se {row['se']:.4f}{' (extrapolated)' if row['extrapolated'] else ''}"
            f"  measured Δ {m['effect']:+.4f}: E[llr] {m['expected_llr']:.1f}, "
            f"P(settle) {m['p_settle']:.2f}  |  {found['relative']:.0%} Δ {r['effect']:+.4f}: "
            f"E[llr] {r['expected_llr']:.1f}, P(settle) {r['p_settle']:.2f}")
    return lines


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path)
    parser.add_argument("--relative", type=float, default=0.03)
    parser.add_argument("--alpha", type=float, default=0.01)
    args = parser.parse_args()
    print("\n".join(render(separation(args.results, args.relative, args.alpha))))
