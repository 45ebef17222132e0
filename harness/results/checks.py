"""What a file in a results folder may be before anything reads its figures.

Results folders are copied between machines, synced, hand-edited and damaged; a reader
must neither hang, nor crash, nor believe an impossible figure. So:
- only regular files are read (a FIFO in place of run.json would block `open` forever),
  and only up to a size (`MAX_FILE_BYTES`);
- JSON is parsed strictly: a duplicate key (which would silently pick one of two
  figures), NaN / Infinity (not JSON) and integers beyond 64 bits are refused;
- every string is bounded (`MAX_NAME_CHARS` for keys and the names a plot or table
  prints, `MAX_TEXT_CHARS` for any other), so that a 5 MB label cannot stall a plot;
- a measurement's figures must be possible: accept length (either definition, its CI,
  per category) >= 1, since each verify step makes at least one token, and at most what a
  verify step of the record's settings makes in its definition (`step_of`: the suite
  validator's bound, `harness.speculation.bounds`); counts non-negative and consistent
  with each other (completion tokens >= verify steps; each stated figure equal to the one
  its counts give); accuracy in [0, 1].

Each check raises `Skip` (harness.results.rows) naming the field; callers say which file.
"""

from __future__ import annotations

import json
import math
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from harness.results.rows import METRICS
from harness.speculation.bounds import (
    ALGORITHMS,
    DEFAULT_ALGORITHM,
    MAX_DRAFT_TOKENS,
    StepBound,
    loosest_bound,
    step_bound,
)
from harness.speculation.bounds import (
    NON_DRAFT_TOKENS as NON_DRAFT_BY_ALGORITHM,
)

MAX_FILE_BYTES = 64 * 2**20  # a run.json is kilobytes; a requests.jsonl of 10^5 rows ~30 MB
MAX_NAME_CHARS = 1024  # labels, ids, names, specs, sources: what plots and tables print
MAX_TEXT_CHARS = 2**20
MAX_INT = 2**63 - 1
MAX_DEPTH = 64
NAME_FIELDS = frozenset({"label", "run_id", "name", "kind", "spec", "source", "entry",
                         "metric", "version", "engine", "git_sha", "ref"})
RELATIVE_TOLERANCE = 1e-6  # a stated figure vs the one its counts give (float rounding)
MAX_BLOCK = MAX_DRAFT_TOKENS  # the suite model's bound on num_draft_tokens / block_size
UNKNOWN_STEP = loosest_bound(None, None, None)  # a file that names no settings
MOST_ACCEPT_LENGTH = UNKNOWN_STEP.accept_length("per_request")  # whatever the settings


class BadFile(ValueError):
    """A file or document that is not what it may be; the message names the field."""


def read_regular(file: Path, limit: int = MAX_FILE_BYTES) -> tuple[bytes, os.stat_result]:
    """The bytes of a regular file (at most `limit`); BadFile for anything else.
    FileNotFoundError passes through (a run still being written is no error)."""
    # O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever
    fd = os.open(file, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode):
            raise BadFile("not a regular file")
        if status.st_size > limit:
            raise BadFile(f"{status.st_size} bytes, more than the {limit} a record may hold")
        with os.fdopen(fd, "rb", closefd=False) as handle:
            data = handle.read(limit + 1)
    finally:
        os.close(fd)
    if len(data) > limit:
        raise BadFile(f"more than the {limit} bytes a record may hold")
    return data, status


def _pairs(pairs: list[tuple[str, object]]) -> dict[str, object]:
    seen = dict(pairs)
    if len(seen) != len(pairs):  # the rare case: find the key to name it
        keys = [key for key, _ in pairs]
        duplicate = next(key for i, key in enumerate(keys) if key in keys[:i])
        raise BadFile(f"duplicate key {duplicate[:40]!r}")
    return seen


def _constant(name: str) -> object:
    raise BadFile(f"{name} is not a JSON number")


def _integer(text: str) -> int:
    if len(text.lstrip("-")) > 19 or abs(value := int(text)) > MAX_INT:
        raise BadFile(f"integer {text[:24]}... is beyond 64 bits")
    return value


def strict_json(text: bytes | str) -> object:
    """JSON without duplicate keys, NaN/Infinity or integers beyond 64 bits (BadFile);
    ValueError / RecursionError for text that is not JSON at all."""
    return json.loads(text, object_pairs_hook=_pairs, parse_constant=_constant,
                      parse_int=_integer)


def _strings(value: object, path: str, depth: int = 0) -> Iterator[tuple[str, str]]:
    if depth > MAX_DEPTH:
        raise BadFile(f"{path or 'record'}: nested deeper than {MAX_DEPTH}")
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield f"{path}.name" if path else "name", key  # a key is a name: bounded as one
            yield from _strings(item, f"{path}.{key}" if path else str(key), depth + 1)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _strings(item, f"{path}[{i}]", depth + 1)


def may_hold_long_strings(raw: bytes | str) -> bool:
    """False when no string of the JSON text `raw` can be longer than MAX_NAME_CHARS: no
    run of that many characters without a quote, and no escaped quote (which could hide
    one inside a string). A C-speed scan that spares walking every string of the
    usual record."""
    raw = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
    if len(raw) <= MAX_NAME_CHARS:
        return False
    return b'\\"' in raw or max(map(len, raw.split(b'"'))) > MAX_NAME_CHARS


def check_sizes(data: object, raw: bytes | str | None = None) -> None:
    """BadFile naming the first string longer than it may be (`raw`: the JSON text it
    was parsed from, for the fast check)."""
    if raw is not None and not may_hold_long_strings(raw):
        return
    for path, text in _strings(data, ""):
        leaf = path.rsplit(".", 1)[-1]
        limit = MAX_NAME_CHARS if leaf in NAME_FIELDS else MAX_TEXT_CHARS
        if len(text) > limit:
            raise BadFile(f"{path or 'key'}: {len(text)} characters, more than {limit}")


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _positive(*values: object) -> int | None:
    return next((v for v in values if isinstance(v, int) and not isinstance(v, bool)
                 and v > 0), None)


def _object(value: object, key: str) -> dict[str, object]:
    found = value.get(key) if isinstance(value, dict) else None
    return found if isinstance(found, dict) else {}


def step_of(data: object) -> StepBound:
    """The most one verify step of a record's settings makes: the suite validator's bound
    (`harness.speculation.bounds.step_bound`) on the `[speculative]` settings and engine
    its suite document names (the draft count its build ran with where the document has
    none); a count it leaves unset at its largest, as the validator takes it; an algorithm
    it names that no suite may have at the largest of any."""
    document = _object(_object(data, "suite"), "document")
    spec, build = _object(document, "speculative"), _object(data, "build")
    options = _object(build, "options")
    engine = _object(document, "engine").get("kind") or build.get("engine")
    engine = engine if isinstance(engine, str) else "sglang"
    counts = (_positive(spec.get("num_draft_tokens"), spec.get("block_size"),
                        options.get("num_draft_tokens")),
              _positive(spec.get("num_steps")), _positive(spec.get("eagle_topk")))
    algorithm = spec.get("algorithm", options.get("algorithm", DEFAULT_ALGORITHM))
    if algorithm not in ALGORITHMS:
        return loosest_bound(*counts, engine)
    return step_bound(algorithm, *counts, engine)


def metric_of(measurement: dict[str, object]) -> str:
    """The definition a measurement's `accept_length` is in: its `metric`; a schema 1
    record's (or one that names none) per_request, the looser."""
    metric = measurement.get("metric")
    return metric if metric in METRICS else "per_request"


# per verify step besides the correct drafts, whichever the algorithm (SGLang's
# num_non_draft_tokens_per_req)
NON_DRAFT_TOKENS = tuple(sorted({1, *NON_DRAFT_BY_ALGORITHM.values()}))
COUNT_FIELDS = ("n_requests", "n_finished", "n_planned", "n_prompts", "n_correct",
                "completion_tokens", "verify_steps", "correct_drafts")


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=RELATIVE_TOLERANCE, abs_tol=1e-9)


def check_measurement(data: dict[str, object]) -> None:
    """BadFile naming the first impossible figure of a record's measurement."""
    m = data.get("measurement")
    if not isinstance(m, dict) or not m:
        return
    step, metric = step_of(data), metric_of(m)

    def accept(where: str, value: object, metric: str) -> None:
        number = _number(value)
        if value is None or number is None:
            return  # types are the record model's and the loader's to check
        if not math.isfinite(number) or number < 1:
            raise BadFile(f"measurement.{where}: {value!r} is impossible: an accept length "
                          "is at least 1 (each verify step makes a token)")
        if number > step.accept_length(metric):
            raise BadFile(f"measurement.{where}: {value!r} is impossible: "
                          f"{step.accept_reason(metric)}")

    accept("accept_length", m.get("accept_length"), metric)
    for key in METRICS:
        accept(f"accept_length_{key}", m.get(f"accept_length_{key}"), key)
    ci = m.get("accept_length_ci")
    if isinstance(ci, list) and len(ci) == 2:
        accept("accept_length_ci[0]", ci[0], metric)
        accept("accept_length_ci[1]", ci[1], metric)
        low, high = _number(ci[0]), _number(ci[1])
        if low is not None and high is not None and low > high:
            raise BadFile(f"measurement.accept_length_ci: low {ci[0]!r} above high {ci[1]!r}")
    categories = m.get("categories")
    if isinstance(categories, dict):
        for name, category in categories.items():
            if isinstance(category, dict):
                accept(f"categories.{name}.accept_length", category.get("accept_length"),
                       metric)
    for key in COUNT_FIELDS:
        value = m.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value < 0:
            raise BadFile(f"measurement.{key}: {value} is negative")
    accuracy = _number(m.get("accuracy"))
    if accuracy is not None and not 0 <= accuracy <= 1:
        raise BadFile(f"measurement.accuracy: {m['accuracy']!r} is not in [0, 1]")
    _check_counts(m)


def _count(m: dict[str, object], key: str) -> int | None:
    value = m.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _check_counts(m: dict[str, object]) -> None:
    tokens, steps, correct = (_count(m, k) for k in ("completion_tokens", "verify_steps",
                                                     "correct_drafts"))
    if tokens is not None and steps is not None and tokens < steps:
        raise BadFile(f"measurement.completion_tokens: {tokens} is below verify_steps {steps} "
                      "(each verify step makes at least one token)")
    if not steps:
        return
    # per_request pools only requests with a verify step: a prefill-only request (its one
    # token, no step) is in no spec figure, as in SGLang, while completion_tokens counts
    # every token. So tokens - n_requests <= pooled tokens <= tokens.
    per_request = _number(m.get("accept_length_per_request"))
    if tokens is not None and per_request is not None:
        requests = _count(m, "n_requests") or 0
        low, high = max(tokens - requests, 0) / steps, tokens / steps
        if not low - 1e-6 <= per_request <= high + 1e-6:
            raise BadFile(f"measurement.accept_length_per_request: "
                          f"{m['accept_length_per_request']!r} disagrees with its counts "
                          f"({high:.6g} from completion_tokens / verify_steps)")
    # server_avg: each step makes its correct drafts and k more tokens (SGLang's
    # num_non_draft_tokens_per_req: 1, or 2 for UNO)
    server_avg = _number(m.get("accept_length_server_avg"))
    if correct is not None and server_avg is not None and not any(
            _close(server_avg, (correct + k * steps) / steps) for k in NON_DRAFT_TOKENS):
        raise BadFile(f"measurement.accept_length_server_avg: "
                      f"{m['accept_length_server_avg']!r} disagrees with its counts "
                      f"({(correct + steps) / steps:.6g} from correct_drafts and verify_steps)")
    metric = m.get("metric")
    if metric in METRICS:
        stated, own = _number(m.get("accept_length")), _number(m.get(f"accept_length_{metric}"))
        if stated is not None and own is not None and not _close(stated, own):
            raise BadFile(f"measurement.accept_length: {m['accept_length']!r} is not its "
                          f"metric's figure accept_length_{metric} {own!r}")
