"""The verdict-combination matrix (issue 27): fixed/sequential x --against (none, A
measured, A reused) x one or two workload entries x every floor kind x a side partial
or errored, on simulated rows of known truth. Every combination is judged by the one
judge as the runner forms its evidence; the sequential verdict and exit code must be
the fixed protocol's, and the fixed protocol's must be the truth's (clear margins)."""

from __future__ import annotations

import functools
import itertools

import numpy as np
import pytest

from harness.errors import EngineError, ExitCode
from harness.run.outcome import RunOutcome, combined
from harness.suite.gate import Gate
from harness.suite.model import Floors
from tests.run.simulated import Truth, reference_of, replay, rows_of, suite_with

N = 200
FLOORS = Floors(accept_length=3.0, accuracy=0.6, positions=[0.5],
                categories={"math": {"accept_length": 3.0}})
GOOD = Truth()
TRUTHS = {  # name -> (B's truth, expected status without a reference, with one)
    "good": (GOOD, "pass", "pass"),
    "accept length below": (Truth(accept=2.6, math=2.6), "fail", "fail"),
    "accuracy below": (Truth(accuracy=0.4), "fail", "fail"),
    "category below": (Truth(math=2.4), "fail", "fail"),
    "position below": (Truth(position1=0.3), "fail", "fail"),
    "worse than A only": (Truth(accept=3.6), "pass", "fail"),
}
SIDES = ("complete", "B partial", "A errored")
AGAINST = ("none", "A measured", "A reused")
EXIT = {"pass": ExitCode.PASS, "fail": ExitCode.BELOW_FLOOR, "error": ExitCode.ENGINE_ERROR}


@functools.cache
def _entry(truth: Truth, seed: int, sequential: bool, against: str, side: str
           ) -> RunOutcome:
    suite = suite_with(FLOORS, Gate(relative_drop=0.02))
    noise = np.random.default_rng(seed).normal(0.0, 0.6, N)
    a_rows = rows_of(GOOD, N, seed, shared=noise)
    b_rows = rows_of(truth, N, seed, shared=noise)
    reference = None
    a_errored = against != "none" and side == "A errored"
    if against != "none" and not a_errored:
        reference = reference_of(a_rows, suite.name, reused=against == "A reused")
    try:
        found, _ = replay(suite, b_rows, sequential, reference,
                          partial_at=30 if side == "B partial" else None,
                          paired_without_reference=a_errored)
    except EngineError as error:  # the runner records it as an error (exit 3)
        return RunOutcome("error", ExitCode.ENGINE_ERROR, [error.message])
    if found.paired is not None:
        assert found.paired["against"]["reused"] == (against == "A reused")
    return RunOutcome(found.verdict.status, found.exit_code, found.verdict.reasons)


def _truth(name: str, against: str, side: str) -> str:
    if side == "B partial" or (side == "A errored" and against != "none"):
        return "error"
    _, alone, paired = TRUTHS[name]
    return alone if against == "none" else paired


CASES = list(itertools.product(TRUTHS, AGAINST, SIDES, (1, 2)))


@pytest.mark.parametrize("name, against, side, entries", CASES)
def test_every_combination_matches_the_fixed_protocol(name: str, against: str, side: str,
                                                      entries: int) -> None:
    truth = TRUTHS[name][0]
    verdicts = {}
    for sequential in (False, True):
        outcomes = [_entry(truth, 11, sequential, against, side)]
        if entries == 2:  # a second, healthy entry: the suite's outcome is the worst
            outcomes.insert(0, _entry(GOOD, 12, sequential, against, "complete"))
        verdicts[sequential] = combined(outcomes)
    fixed, sequential = verdicts[False], verdicts[True]
    expected = _truth(name, against, side)
    assert (fixed.status, fixed.exit_code) == (expected, EXIT[expected]), fixed.reasons
    assert (sequential.status, sequential.exit_code) == (fixed.status, fixed.exit_code), \
        sequential.reasons
