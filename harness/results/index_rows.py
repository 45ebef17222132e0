"""The index's rows checked like records (issue 29): a forged or damaged `.index.jsonl`
line or snapshot column is never believed.

The index (`harness.results.index`) holds each run's loader row (`rows.flatten_record`), so
every rule a record's figures meet (`checks.check_measurement`, `possible`) is checked
again on the row, column by column: the type of each column, its bounds (accept length in
[1, MOST_ACCEPT_LENGTH], shares in [0, 1], counts non-negative), the figure inside its CI, the
counts consistent with the figures, a time that parses, a name of bounded length. A row
that breaks one is dropped from the index and its run re-read from its folder (where its
run.json is checked in full). Vectorised where the index is long (100,000 runs load in
seconds): distinct values are checked once, numbers with numpy.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import TypeAlias

import numpy as np
from numpy.typing import NDArray

from harness.results.checks import (
    MAX_NAME_CHARS,
    MAX_TEXT_CHARS,
    MOST_ACCEPT_LENGTH,
    NON_DRAFT_TOKENS,
)
from harness.results.rows import COUNTS, FLAGS, FLOATS, KINDS, METRICS, VERDICTS

ACCEPT = ("accept_length", "ci_low", "ci_high", "accept_length_server_avg",
          "accept_length_per_request", "accept_length_per_request_mean",
          "accept_length_spec_accept_length_mean",
          "server_reported_accept_length", "floor")
SHARES = ("accuracy", "ci_level")
CHOICES = {"kind": KINDS, "verdict": VERDICTS, "metric": METRICS,
           "build.engine": ("sglang", "reference", "vllm")}
REQUIRED = ("suite", "run_id", "kind")
LONG_TEXT = ("reasons", "build.options")
TIMES = ("started_at", "finished_at")
TOLERANCE = 1e-6

Floats: TypeAlias = NDArray[np.float64]
# marks the rows at `positions` (a boolean mask, or a list of positions) bad for `reason`
Mark: TypeAlias = Callable[[NDArray[np.bool_] | list[int], str], None]


def _types(name: str) -> tuple[type, ...]:
    if name in FLOATS:
        return (float, int, type(None))
    if name in COUNTS:
        return (int, type(None))
    if name in FLAGS:
        return (bool, type(None))
    return (str, type(None))


def _time_ok(text: str) -> bool:
    try:
        return 1678 <= datetime.fromisoformat(text).year <= 2261
    except ValueError:
        return False


def bad_rows(table: Mapping[str, Sequence[object]], n: int,
             suite: str | None = None) -> dict[int, str]:
    """Positions of the rows of `table` (column name -> n values) that no record could
    have given (in the folder of `suite`, when given), each with the first reason found."""
    bad: dict[int, str] = {}

    def mark(positions: NDArray[np.bool_] | list[int], reason: str) -> None:
        for i in np.flatnonzero(positions) if not isinstance(positions, list) else positions:
            bad.setdefault(int(i), reason)

    floats: dict[str, Floats] = {}
    for name, column in table.items():
        allowed = _types(name)
        if name in FLOATS and isinstance(column, array):  # array("d"): numbers already
            floats[name] = np.frombuffer(column, dtype=float)
            continue
        kinds = set(map(type, column))
        if not kinds <= set(allowed) or (name in FLOATS and bool in kinds):
            mark([i for i, v in enumerate(column)
                  if type(v) not in allowed or (name in FLOATS and isinstance(v, bool))],
                 f"{name}: not {'a number' if name in FLOATS else allowed[0].__name__}")
        if name in FLOATS:
            floats[name] = np.array([v if type(v) in (float, int) else math.nan
                                     for v in column], dtype=float)
        elif name in COUNTS:
            values = {v for v in column if type(v) is int}
            wrong = {v for v in values if not 0 <= v < 2**63}
            if wrong:
                mark([i for i, v in enumerate(column) if v in wrong and type(v) is int],
                     f"{name}: a count out of range")
        elif name in FLAGS:
            continue
        else:
            _check_text(name, column, mark)
    for name in REQUIRED:
        if name in table:
            mark([i for i, v in enumerate(table[name]) if v is None], f"{name}: missing")
    if suite is not None and "suite" in table:  # a record lives in its suite's folder
        mark([i for i, v in enumerate(table["suite"]) if v != suite],
             f"suite: not its folder's ({suite!r:.80})")
    _check_figures(floats, table, n, mark)
    return bad


def _check_text(name: str, column: Sequence[object], mark: Mark) -> None:
    distinct = {v for v in column if isinstance(v, str)}
    limit = MAX_TEXT_CHARS if name in LONG_TEXT else MAX_NAME_CHARS
    wrong = {v for v in distinct if len(v) > limit}
    if name in CHOICES:
        wrong |= {v for v in distinct if v not in CHOICES[name]}
    if name in TIMES:
        wrong |= {v for v in distinct if not _time_ok(v)}
    if wrong:
        mark([i for i, v in enumerate(column) if isinstance(v, str) and v in wrong],
             f"{name}: not a value a record can give")


def _check_figures(f: dict[str, Floats], table: Mapping[str, Sequence[object]], n: int,
                   mark: Mark) -> None:
    if not f:
        return
    nan = np.full(n, np.nan)

    def get(name: str) -> Floats:
        return f.get(name, nan)

    with np.errstate(invalid="ignore", divide="ignore"):
        for name, values in f.items():
            mark(np.isinf(values) | (np.abs(values) >= 1e300), f"{name}: not a finite number")
        for name in ACCEPT:
            values = get(name)
            mark((values < 1) | (values > MOST_ACCEPT_LENGTH),  # the door checks its settings'
                 f"{name}: an accept length is between 1 and {MOST_ACCEPT_LENGTH}")
        for name in SHARES:
            values = get(name)
            mark((values < 0) | (values > 1), f"{name}: a share is in [0, 1]")
        for name in ("output_throughput_tok_s", "duration_s"):
            mark(get(name) < 0, f"{name}: negative")
        figure, low, high = get("accept_length"), get("ci_low"), get("ci_high")
        slack = TOLERANCE * np.maximum(1.0, np.abs(high))
        mark(low > high, "ci_low: above ci_high")
        mark((figure < low - slack) | (figure > high + slack),
             "accept_length: outside its own interval")

        def counts(name: str) -> Floats:
            column = table.get(name)
            if column is None:
                return nan
            return np.array([v if type(v) is int else np.nan for v in column], dtype=float)

        tokens, steps = counts("completion_tokens"), counts("verify_steps")
        correct, requests = counts("correct_drafts"), counts("n_requests")
        mark(tokens < steps, "completion_tokens: below verify_steps")
        per_request, server_avg = get("accept_length_per_request"), get("accept_length_server_avg")
        with_steps = steps > 0
        high_pr = tokens / steps
        low_pr = np.maximum(tokens - np.nan_to_num(requests), 0) / steps
        mark(with_steps & ((per_request < low_pr - 1e-6) | (per_request > high_pr + 1e-6)),
             "accept_length_per_request: disagrees with its counts")
        agrees = np.zeros(n, dtype=bool)
        for k in NON_DRAFT_TOKENS:
            own = (correct + k * steps) / steps
            agrees |= np.abs(server_avg - own) <= TOLERANCE * np.maximum(1.0, np.abs(own))
        mark(with_steps & ~np.isnan(correct) & ~np.isnan(server_avg) & ~agrees,
             "accept_length_server_avg: disagrees with its counts")
        metrics = table.get("metric")
        if metrics is not None:
            for metric in METRICS:
                is_metric = np.array([m == metric for m in metrics], dtype=bool)
                own = get(f"accept_length_{metric}")
                differs = np.abs(figure - own) > TOLERANCE * np.maximum(1.0, np.abs(own))
                mark(is_metric & differs, f"accept_length: not its metric's figure ({metric})")
