"""The search of a bisect, apart from how commits are measured.

Commits are indexed oldest first: 0 .. N-1 are the commits after GOOD up to BAD, so BAD
is N-1 and GOOD sits at -1. The first bad commit lies in (lo, hi], lo the last commit
known good and hi the first known bad. Each step tests the untested commit nearest the
middle of that range; a commit that is skipped (failed to build or launch) or stayed
undecided is passed over like `git bisect skip`. With none left to test, the range
holds the answer: one commit, or several when skipped ones stand in the way.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

Outcome = Literal["good", "bad", "skip", "undecided"]


@dataclass(frozen=True)
class Range:
    """Where the first bad commit lies: indices lo+1 .. hi."""

    lo: int
    hi: int

    @property
    def candidates(self) -> list[int]:
        return list(range(self.lo + 1, self.hi + 1))

    @property
    def found(self) -> bool:
        return self.hi == self.lo + 1


def bounds(n: int, outcomes: Mapping[int, Outcome]) -> Range:
    """The range left by the outcomes so far (BAD = n-1 is bad, GOOD = -1 is good)."""
    hi = min([i for i, o in outcomes.items() if o == "bad"] + [n - 1])
    lo = max([i for i, o in outcomes.items() if o == "good" and i < hi] + [-1])
    return Range(lo, hi)


def next_commit(n: int, outcomes: Mapping[int, Outcome]) -> int | None:
    """The next commit to test, or None when the range cannot be narrowed further."""
    where = bounds(n, outcomes)
    untested = [i for i in range(where.lo + 1, where.hi) if i not in outcomes]
    if not untested:
        return None
    middle = (where.lo + where.hi) / 2
    return min(untested, key=lambda i: (abs(i - middle), i))


def max_steps(n: int) -> int:
    """Steps a bisect of n commits needs with no skips: ceil(log2 n)."""
    return math.ceil(math.log2(n)) if n > 1 else 0
