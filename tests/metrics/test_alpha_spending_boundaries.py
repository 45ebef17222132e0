"""Sequential paired looks keep their stated alpha (issue 27, case 2): the Lan-DeMets
boundaries, checked against published values and a Brownian-motion simulation, and the
paired rule's false-pass and false-fail rates on simulated pairs of known truth."""

from __future__ import annotations

import numpy as np
import pytest

from harness.metrics import paired_gate as gate
from harness.metrics.spending import boundaries, nominal_alphas
from tests.metrics.test_paired_non_inferiority import RELATIVE, pair

QUARTERS = (0.25, 0.5, 0.75, 1.0)


def test_obrien_fleming_boundaries_match_the_published_values() -> None:
    # Jennison and Turnbull (2000) / gsDesign: K = 4 equal looks, one-sided 0.025
    assert boundaries(QUARTERS, 0.025) == pytest.approx([4.3326, 2.9631, 2.3590, 2.0141],
                                                        abs=2e-3)
    assert boundaries((1.0,), 0.05) == pytest.approx([1.6449], abs=1e-4)  # one look: fixed
    pocock = boundaries(QUARTERS, 0.025, "pocock")
    assert max(pocock) - min(pocock) < 0.03  # Pocock type: about flat


@pytest.mark.parametrize("kind", ["obrien_fleming", "pocock"])
@pytest.mark.parametrize("fractions", [QUARTERS, (0.1, 0.3, 0.6, 1.0), (0.5, 1.0)])
def test_boundaries_spend_exactly_alpha_over_all_looks(kind: str, fractions) -> None:
    rng = np.random.default_rng(7)
    f = np.asarray(fractions)
    steps = rng.normal(size=(200_000, f.size)) * np.sqrt(np.diff(np.r_[0.0, f]))
    z = np.cumsum(steps, axis=1) / np.sqrt(f)
    crossed = (z > np.asarray(boundaries(fractions, 0.05, kind))).any(axis=1).mean()
    assert crossed == pytest.approx(0.05, abs=0.0025)  # binomial sd 0.0005
    assert sum(nominal_alphas(fractions, 0.05, kind)) > 0.05  # looks overlap: not Bonferroni


def _run(rule: gate.PairedRule, shift: float, seed: int) -> gate.PairedResult:
    """The driver's loop: look after each wave, stop when settled."""
    a, b = pair(rule.max_n, shift, 0.5, seed=seed)
    for n in rule.looks():
        found = rule.decide((a[0][:n], a[1][:n]), (b[0][:n], b[1][:n]))
        if found is not None:
            return found
    raise AssertionError("the last look always decides")


def _rates(shift: float, reps: int) -> dict[str, float]:
    rule = gate.PairedRule(RELATIVE, alpha=0.05, max_n=200, wave=50)
    found = [_run(rule, shift, seed).decision for seed in range(reps)]
    return {d: found.count(d) / reps for d in ("not_worse", "worse", "inconclusive")}


def test_false_pass_rate_at_the_tolerance_is_at_most_alpha() -> None:
    """B worse by exactly the tolerance (2% of 4.0): the rule that spent alpha/3 early and
    the full alpha at the last look passed 7-9%."""
    rates = _rates(-0.08, 1500)
    assert rates["not_worse"] <= 0.05 + 2.5 * 0.0056, rates  # binomial sd 0.0056
    assert rates["worse"] <= 0.05 + 2.5 * 0.0056, rates  # the other side: M = 0 too


def test_false_fail_rate_at_zero_change_is_the_fixed_tests() -> None:
    """B = A: the sequential rule fails (worse or inconclusive, judged fail) about as often
    as the fixed test on all questions (O'Brien-Fleming spends little early), and never
    calls B worse."""
    rates = _rates(0.0, 600)
    fixed_pass, _ = gate.pass_probabilities(0.08, _margin_sd(), 200,
                                            0.05)
    assert rates["worse"] == 0.0
    assert abs(rates["not_worse"] - fixed_pass) < 0.06, (rates, fixed_pass)


def _margin_sd() -> float:
    """The per-question sd of the margin in these pairs (as `harness power` would take it
    from a recorded pair)."""
    a, b = pair(2000, 0.0, 0.5, seed=99)
    return gate.paired_test(a, b, RELATIVE).margin_sd
