"""A bisect session's journal, typed: the commits it lists, each finished measurement
(`steps.jsonl`, one entry a line) and the result (`result.json`).

The journal is the harness's own file, but a user can edit or cut it, and `--resume`
replays it: each entry read back is validated against `JournalEntry`, so a changed field
is named (exit 2) instead of read as if it were right.
"""

from __future__ import annotations

from typing import Literal

from pydantic import TypeAdapter, ValidationError
from typing_extensions import TypedDict  # pydantic validates it on Python < 3.12


class Commit(TypedDict):
    """One commit between GOOD and BAD (`git log`'s own fields)."""

    sha: str
    subject: str
    author_date: str


class Statistic(TypedDict, total=False):
    """What the rule saw at the look that settled a measurement: the endpoint test's
    (difference, se, p_value, difference_ci) or a step's (difference, se, llr, threshold),
    and the questions `n` it was decided on."""

    difference: float
    se: float
    p_value: float
    difference_ci: list[float] | None
    llr: float
    threshold: float
    n: int


Verdict = Literal["good", "bad", "skip", "undecided", "reference", "differs",
                  "no difference"]


class JournalEntry(TypedDict, total=False):
    """One finished measurement: which commit in which role, its verdict (`skip` with a
    reason when the build or launch failed), its run record and figure (`metric`'s
    definition, the session's), and the rule's statistic."""

    role: str
    commit: str
    index: int | None
    label: str
    spec: str
    prompts: int
    verdict: Verdict
    reason: str
    requests: int
    run_dir: str | None
    run_id: str | None
    accept_length: float | None
    ci: list[float] | None
    stat: Statistic


class Side(TypedDict):
    """A commit in the result and the run that classified it (None: no figure)."""

    sha: str
    subject: str
    author_date: str
    role: str
    run_dir: str | None
    accept_length: float | None
    ci: list[float] | None
    requests: int | None
    verdict: str | None
    difference: float | None
    difference_se: float | None


class Endpoints(TypedDict):
    """BAD - GOOD on the same prompts, the test that decides whether there is anything
    to bisect."""

    difference: float
    ci: tuple[float, float] | None
    p_value: float
    alpha: float
    differ: bool
    good: Side
    bad: Side


Status = Literal["no difference", "found", "range"]


class BisectResult(TypedDict, total=False):
    """`result.json`: what a session found and what it cost."""

    session: str
    suite: str
    metric: str
    good: str
    bad: str
    commits: int
    first_parent: bool
    paths: list[str]
    steps: int
    max_steps: int
    runs: int
    requests: int
    skipped: list[str]
    undecided: list[str]
    endpoints: Endpoints | None
    status: Status
    candidates: list[Commit]
    first_bad: Side | None
    before: Side
    after: Side
    bad_outside_paths: bool


_ENTRY = TypeAdapter(JournalEntry)
_COMMITS = TypeAdapter(list[Commit])


def entry_from_json(data: object, where: str) -> JournalEntry:
    """A journal line's entry, checked; ValueError naming `where` and the field."""
    try:
        return _ENTRY.validate_python(data)
    except ValidationError as error:
        first = error.errors()[0]
        field = ".".join(str(part) for part in first["loc"]) or "the entry"
        raise ValueError(f"{where}: {field}: {first['msg']}") from None


def commits_from_json(data: object, where: str) -> list[Commit]:
    """session.json's commits, checked; ValueError naming `where` and the field."""
    try:
        return _COMMITS.validate_python(data)
    except ValidationError as error:
        first = error.errors()[0]
        field = ".".join(str(part) for part in first["loc"])
        raise ValueError(f"{where}: commits.{field}: {first['msg']}") from None
