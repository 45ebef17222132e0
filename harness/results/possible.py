"""Which figures a record may hold beyond its measurement's totals (`checks.check_measurement`):
entry counts, probabilities, categories, intervals, the suite's floors and baselines, the
paired gate's finding, a request row, an index row, a calibration record.

Each rule is one an honest record always meets, so a record that breaks one was damaged or
forged: a reader skips it (one line naming the file and field) rather than plot it.
- Entry counts are bounded (a draft block is at most `MAX_BLOCK` tokens, so there are at
  most that many positions; `MAX_CATEGORIES` categories; `MAX_BASELINES` baselines), so a
  record of 10^5 positions cannot stall a plot.
- A figure is a JSON number, never a string (`"-3"`, `"NaN"`), and finite.
- Probabilities (per-position acceptance and its CI, accuracy) lie in [0, 1]; counts are
  non-negative; an interval's low is not above its high, and the figure lies inside it.
- Accept length (a figure, a floor, a baseline) is at least 1 and at most what a verify
  step of the record's settings makes in the figure's definition (`checks.step_of`: the
  bound the suite validator refuses a floor above); a figure whose definition the record
  does not say, at most the larger (per_request).
- Latency (harness.metrics.latency) is a non-negative number of seconds, a distribution's
  p50 <= p90 <= p99, each figure inside its interval; throughput is non-negative; a
  request's output arrives in time order, its TTFT being its first arrival.
Each check raises `BadFile` naming the field.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from typing import TypeGuard

from harness.results.checks import (
    MAX_BLOCK,
    UNKNOWN_STEP,
    BadFile,
    check_measurement,
    check_sizes,
    metric_of,
    step_of,
)
from harness.speculation.bounds import StepBound

MAX_POSITIONS = MAX_BLOCK + 2  # per-position entries, histogram bins (0..block accepted)
MAX_CATEGORIES = 256  # Spec-Bench has 13; a plot of 256 bars takes seconds
MAX_BASELINES = 256
MAX_REASONS = 4096
CI_TOLERANCE = 1e-6  # a figure vs its own interval (float rounding)
PRINTED = 1e-3  # a stated difference vs the one its figures give (as rounded in print)


def _is_number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def number(where: str, value: object, low: float | None = None, high: float | None = None,
           what: str = "") -> float | None:
    """A JSON number (None stays None) that is finite and within [low, high]; BadFile
    for a string, a boolean, or anything out of bounds."""
    if value is None:
        return None
    if not _is_number(value):
        raise BadFile(f"{where}: expected a number, got {type(value).__name__} {value!r:.40}")
    figure = float(value)
    if not math.isfinite(figure) or (low is not None and figure < low) or \
            (high is not None and figure > high):
        bounds = f" ({what})" if what else ""
        raise BadFile(f"{where}: {value!r:.40} is impossible{bounds}")
    return figure


def count(where: str, value: object) -> int | None:
    if value is None:
        return None
    if not _is_number(value) or not isinstance(value, int) or value < 0:
        raise BadFile(f"{where}: expected a non-negative integer, got {value!r:.40}")
    return value


def part_of_count(where: str, found: Mapping[str, object], part: str, whole: str) -> None:
    """`found[part]` and `found[whole]` counts (or absent), the part no more than the whole."""
    counted, total = (count(f"{where}.{key}", found.get(key)) for key in (part, whole))
    if counted is not None and total is not None and counted > total:
        raise BadFile(f"{where}.{part}: {counted} is more than {whole} {total}")


def entries(where: str, value: object, limit: int) -> None:
    if isinstance(value, list | dict) and len(value) > limit:
        raise BadFile(f"{where}: {len(value)} entries, more than the {limit} it may hold")


UNKNOWN = UNKNOWN_STEP  # settings a file does not name (calibrations)
LOOSER = "per_request"  # of the two definitions, the one with the larger maximum


def top_of(step: StepBound, metric: str = LOOSER) -> float:
    """The largest possible accept length in `metric` for a step bounded by `step`."""
    return float(step.accept_length(metric))


def accept(where: str, value: object, top: float, metric: str = LOOSER) -> float | None:
    return number(where, value, 1.0, top, f"an accept length in {metric} is between 1 and "
                                          f"{top:g}")


def probability(where: str, value: object) -> float | None:
    return number(where, value, 0.0, 1.0, "a share is in [0, 1]")


def interval(where: str, value: object, low: float, high: float, figure: float | None,
             figure_name: str) -> None:
    """[lo, hi] within [low, high], lo <= hi, and `figure` (when given) inside it."""
    if value is None:
        return
    if not isinstance(value, list) or len(value) != 2 or None in value:
        raise BadFile(f"{where}: expected [low, high]")
    bounds = f"between {low:g} and {high:g}"
    number(f"{where}[0]", value[0], low, high, bounds)
    number(f"{where}[1]", value[1], low, high, bounds)
    lo, hi = float(value[0]), float(value[1])  # checked numbers: 0.0 is a bound like any
    if lo > hi:
        raise BadFile(f"{where}: low {value[0]!r} above high {value[1]!r}")
    slack = CI_TOLERANCE * max(1.0, abs(lo), abs(hi))
    if figure is not None and not lo - slack <= figure <= hi + slack:
        raise BadFile(f"{where}: {figure_name} {figure!r} is outside its own interval "
                      f"[{lo!r}, {hi!r}]")


def positions(where: str, values: object, cis: object) -> None:
    entries(where, values, MAX_POSITIONS)
    if isinstance(values, list):
        for i, value in enumerate(values):
            probability(f"{where}[{i}]", value)
    ci_where = where.replace("acceptance", "ci")
    entries(ci_where, cis, MAX_POSITIONS)
    if isinstance(cis, list):
        for i, pair in enumerate(cis):
            own = values[i] if isinstance(values, list) and i < len(values) else None
            interval(f"{ci_where}[{i}]", pair, 0.0, 1.0, own, "the position's rate")


def _category(where: str, category: object, step: StepBound, metric: str) -> None:
    """A measurement's category: its accept length in the measurement's `metric`."""
    if not isinstance(category, Mapping):
        return  # the record model's to refuse
    top = top_of(step, metric)
    figure = accept(f"{where}.accept_length", category.get("accept_length"), top, metric)
    for own in ("server_avg", "per_request", "per_request_mean",
                "spec_accept_length_mean"):
        accept(f"{where}.accept_length_{own}", category.get(f"accept_length_{own}"),
               top_of(step, own), own)
    interval(f"{where}.accept_length_ci", category.get("accept_length_ci"), 1.0, top, figure,
             "accept_length")
    probability(f"{where}.accuracy", category.get("accuracy"))
    for key in ("n_prompts", "n_requests", "completion_tokens", "verify_steps", "n_correct"):
        count(f"{where}.{key}", category.get(key))
    tokens, steps = category.get("completion_tokens"), category.get("verify_steps")
    if isinstance(tokens, int) and isinstance(steps, int) and tokens < steps:
        raise BadFile(f"{where}.completion_tokens: {tokens} is below verify_steps {steps}")
    correct, prompts = category.get("n_correct"), category.get("n_prompts")
    if isinstance(correct, int) and isinstance(prompts, int) and correct > prompts:
        raise BadFile(f"{where}.n_correct: {correct} is more than n_prompts {prompts}")
    positions(f"{where}.per_position_acceptance", category.get("per_position_acceptance"),
              category.get("per_position_ci"))


SPREADS = ("ttft_s", "tpot_s", "itl_s", "e2e_s")
SPREAD_FIGURES = ("mean", "p50", "p90", "p99")
RATES = ("output_tok_s", "requests_s")


def _spread(where: str, spread: object) -> None:
    if not isinstance(spread, Mapping):
        return  # the record model's to refuse
    count(f"{where}.n", spread.get("n"))
    for name in SPREAD_FIGURES:
        figure = number(f"{where}.{name}", spread.get(name), 0.0, None, "seconds are >= 0")
        interval(f"{where}.{name}_ci", spread.get(f"{name}_ci"), 0.0, math.inf, figure, name)
    p50, p90, p99 = (spread.get(name) for name in ("p50", "p90", "p99"))
    if _is_number(p50) and _is_number(p90) and _is_number(p99) and not p50 <= p90 <= p99:
        raise BadFile(f"{where}: percentiles out of order (p50 {p50!r}, p90 {p90!r}, "
                      f"p99 {p99!r})")


def check_latency(where: str, latency: object) -> None:
    """A latency summary's figures (harness.metrics.latency)."""
    if not isinstance(latency, Mapping):
        return
    part_of_count(where, latency, "n_timed", "n_requests")
    count(f"{where}.concurrency", latency.get("concurrency"))
    number(f"{where}.duration_s", latency.get("duration_s"), 0.0, None, "seconds are >= 0")
    probability(f"{where}.ci_level", latency.get("ci_level"))
    entries(f"{where}.notes", latency.get("notes"), MAX_REASONS)
    entries(f"{where}.definitions", latency.get("definitions"), MAX_REASONS)
    for key in SPREADS:
        _spread(f"{where}.{key}", latency.get(key))
    for key in RATES:
        figure = number(f"{where}.{key}", latency.get(key), 0.0, None, "a rate is >= 0")
        interval(f"{where}.{key}_ci", latency.get(f"{key}_ci"), 0.0, math.inf, figure, key)


SPEEDUP_TOP = 1e6  # a speedup past a million-fold is no measurement of two servers


def check_speedup(where: str, found: object) -> None:
    """Speedup figures (harness.metrics.speedup): each a finite number above 0 (a ratio of
    two positive rates), inside its own interval; the sides' TPOT and rates >= 0."""
    if not isinstance(found, Mapping):
        return  # the record model's to refuse
    count(f"{where}.n_prompts", found.get("n_prompts"))
    probability(f"{where}.ci_level", found.get("ci_level"))
    entries(f"{where}.definitions", found.get("definitions"), MAX_REASONS)
    for key in ("tpot", "throughput"):
        figure = number(f"{where}.{key}", found.get(key), 0.0, SPEEDUP_TOP,
                        "a speedup is a ratio of two positive figures")
        if figure == 0.0:
            raise BadFile(f"{where}.{key}: 0 is no speedup of two positive figures")
        interval(f"{where}.{key}_ci", found.get(f"{key}_ci"), 0.0, SPEEDUP_TOP, figure, key)
    for key in ("target_alone_tpot_s", "speculative_tpot_s", "target_alone_output_tok_s",
                "speculative_output_tok_s"):
        number(f"{where}.{key}", found.get(key), 0.0, None, "seconds and rates are >= 0")
    for key in ("speculative_in_flight", "target_alone_in_flight"):
        if number(f"{where}.{key}", found.get(key), 0.0, None, "requests in flight") == 0.0:
            raise BadFile(f"{where}.{key}: 0 requests in flight measured nothing")
    _question_speeds(f"{where}.per_question", found.get("per_question"),
                     found.get("n_prompts"))


QUESTION_SUMS = ("speculative_tpot_sum_s", "speculative_e2e_s", "target_alone_tpot_sum_s",
                 "target_alone_e2e_s")
QUESTION_COUNTS = ("speculative_tpot_n", "speculative_tokens", "target_alone_tpot_n",
                   "target_alone_tokens")


def _question_speeds(where: str, rows: object, paired: object) -> None:
    """The paired questions' sums (harness.metrics.speedup): one per question, as many as
    `n_prompts`, each a TPOT on both sides (the pairing's own rule), times >= 0."""
    if rows is None:
        return
    if not isinstance(rows, list):
        raise BadFile(f"{where}: expected a list")
    if isinstance(paired, int) and len(rows) != paired:
        raise BadFile(f"{where}: {len(rows)} questions, n_prompts says {paired}")
    seen: set[int] = set()
    for i, row in enumerate(rows):
        here = f"{where}[{i}]"
        if not isinstance(row, Mapping):
            raise BadFile(f"{here}: expected an object")
        question = count(f"{here}.question_index", row.get("question_index"))
        if question is None or question in seen:
            raise BadFile(f"{here}.question_index: {row.get('question_index')!r:.40} is "
                          "missing or repeated")
        seen.add(question)
        for key in QUESTION_SUMS:
            if number(f"{here}.{key}", row.get(key), 0.0, None, "seconds are >= 0") is None:
                raise BadFile(f"{here}.{key}: missing")
        for key in QUESTION_COUNTS:
            if count(f"{here}.{key}", row.get(key)) is None:
                raise BadFile(f"{here}.{key}: missing")
        for side in ("speculative", "target_alone"):
            if row[f"{side}_tpot_n"] == 0:
                raise BadFile(f"{here}.{side}_tpot_n: 0: a paired question has a TPOT on "
                              "both sides")


def check_target_alone(where: str, found: object) -> None:
    """The target-alone run's summary ([speedup]): counts and its latency figures."""
    if not isinstance(found, Mapping):
        return
    part_of_count(where, found, "n_requests", "n_planned")
    check_latency(f"{where}.latency", found.get("latency"))
    source = found.get("reused_from")
    if found.get("status") == "reused" and not (isinstance(source, str) and source.strip()):
        raise BadFile(f"{where}.reused_from: {source!r:.40}: a reused target alone names "
                      "the run it is from")


def timing_problem(timing: object) -> str | None:
    """Why a request row's `timing` is impossible, or None."""
    if timing is None:
        return None
    if not isinstance(timing, Mapping):
        return "timing: expected an object"
    chunks = timing.get("chunk_s") or []
    if not isinstance(chunks, list) or not all(
            _is_number(t) and math.isfinite(t) and t >= 0 for t in chunks):
        return "timing.chunk_s: expected a list of non-negative seconds"
    if any(b < a for a, b in itertools.pairwise(chunks)):
        return "timing.chunk_s: output arrives in time order, these go back"
    if chunks and timing.get("ttft_s") != chunks[0]:
        return f"timing.ttft_s: {timing.get('ttft_s')!r:.40} is not the first arrival"
    tokens = timing.get("chunk_tokens")
    if tokens is not None and (not isinstance(tokens, list) or len(tokens) != len(chunks)
                               or not all(isinstance(t, int) and t >= 0 for t in tokens)):
        return "timing.chunk_tokens: expected a non-negative count per arrival"
    return None


def check_figures(data: dict[str, object]) -> None:
    """Every rule above on a parsed run record (the measurement's totals are
    `checks.check_measurement`'s)."""
    step = step_of(data)
    m = data.get("measurement")
    if isinstance(m, Mapping):
        metric = metric_of(dict(m))
        figure = number("measurement.accept_length", m.get("accept_length"))
        interval("measurement.accept_length_ci", m.get("accept_length_ci"), 1.0,
                 top_of(step, metric), figure, "accept_length")
        probability("measurement.ci_level", m.get("ci_level"))
        for key in ("n_prompts", "n_correct", "n_planned", "n_finished"):
            count(f"measurement.{key}", m.get(key))
        positions("measurement.per_position_acceptance", m.get("per_position_acceptance"),
                  m.get("per_position_ci"))
        positions("measurement.server_per_position_acceptance",
                  m.get("server_per_position_acceptance"), None)
        entries("measurement.accept_histogram", m.get("accept_histogram"), MAX_POSITIONS)
        categories = m.get("categories")
        entries("measurement.categories", categories, MAX_CATEGORIES)
        if isinstance(categories, Mapping):
            for name, category in categories.items():
                _category(f"measurement.categories.{name}", category, step, metric)
        check_latency("measurement.latency", m.get("latency"))
        check_speedup("measurement.speedup", m.get("speedup"))
    check_target_alone("target_alone", data.get("target_alone"))
    workload = data.get("workload")
    if isinstance(workload, Mapping):
        entries("workload.categories", workload.get("categories"), MAX_CATEGORIES)
        count("workload.n_prompts", workload.get("n_prompts"))
    verdict = data.get("verdict")
    if isinstance(verdict, Mapping):
        entries("verdict.reasons", verdict.get("reasons"), MAX_REASONS)
    suite = data.get("suite")
    document = suite.get("document") if isinstance(suite, Mapping) else None
    if isinstance(document, Mapping):
        check_document(document, step)
    paired = data.get("paired")
    if paired is not None:
        # a and b are in the gate's definition; the looser bound, whichever it is
        check_paired(paired, top_of(step))


FLOORS_METRIC = "server_avg"  # a suite's floors' definition when it names none


def _metric(value: object, default: str) -> str:
    return value if value in ("server_avg", "per_request", "per_request_mean",
                "spec_accept_length_mean") else default


def check_floors(where: str, floors: object, step: StepBound, default: str = FLOORS_METRIC
                 ) -> str:
    """A document's floors, each accept length within what a step makes in the floors'
    definition (the suite validator's bound); returns that definition."""
    if not isinstance(floors, Mapping):
        return default
    metric = _metric(floors.get("metric"), default)
    top = top_of(step, metric)
    accept(f"{where}.accept_length", floors.get("accept_length"), top, metric)
    probability(f"{where}.accuracy", floors.get("accuracy"))
    entries(f"{where}.positions", floors.get("positions"), MAX_POSITIONS)
    for i, value in enumerate(floors.get("positions") or []):
        probability(f"{where}.positions[{i}]", value)
    categories = floors.get("categories")
    entries(f"{where}.categories", categories, MAX_CATEGORIES)
    if isinstance(categories, Mapping):
        for name, floor in categories.items():
            if isinstance(floor, Mapping):
                accept(f"{where}.categories.{name}.accept_length", floor.get("accept_length"),
                       top, metric)
                probability(f"{where}.categories.{name}.accuracy", floor.get("accuracy"))
    for key in ("speedup_tpot", "speedup_throughput"):  # a ratio floor: above 0, as validated
        if number(f"{where}.{key}", floors.get(key), 0.0, SPEEDUP_TOP, "a speedup is > 0") == 0:
            raise BadFile(f"{where}.{key}: 0 is no speedup floor")
    return metric


def check_baselines(where: str, baselines: object, step: StepBound, metric: str) -> None:
    """Baselines in a suite document: each in its own definition, else its floors'."""
    entries(where, baselines, MAX_BASELINES)
    for i, baseline in enumerate(baselines if isinstance(baselines, list) else []):
        if isinstance(baseline, Mapping):
            own = _metric(baseline.get("metric"), metric)
            accept(f"{where}[{i}].accept_length", baseline.get("accept_length"),
                   top_of(step, own), own)
            probability(f"{where}[{i}].accuracy", baseline.get("accuracy"))


def check_document(document: Mapping[str, object], step: StepBound,
                   where: str = "suite.document") -> None:
    """A suite document's floors and baselines (as a record keeps it): finite, possible
    for the settings' verify step in their definition, bounded in number."""
    metric = check_floors(f"{where}.floors", document.get("floors"), step)
    check_baselines(f"{where}.baselines", document.get("baselines"), step, metric)
    workloads = document.get("workloads")
    entries(f"{where}.workloads", workloads, MAX_CATEGORIES)
    for i, entry in enumerate(workloads if isinstance(workloads, list) else []):
        if isinstance(entry, Mapping):  # an entry's floors default to the suite's metric
            own = check_floors(f"{where}.workloads[{i}].floors", entry.get("floors"), step,
                               metric)
            check_baselines(f"{where}.workloads[{i}].baselines", entry.get("baselines"),
                            step, own)


PAIRED_STATUSES = ("pass", "fail")
DECISIONS = ("not_worse", "worse", "inconclusive")
VERDICTS = ("pass", "fail", "error", "skipped")
# the floors' status beside the gate's: "open" when a sequential run's gate settled first
FLOORS_STATUSES = (*VERDICTS, "open")


def _text(where: str, value: object, required: bool = True) -> None:
    if value is None and not required:
        return
    if not isinstance(value, str):
        raise BadFile(f"{where}: expected a string, got {value!r:.40}")


def _choice(where: str, value: object, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise BadFile(f"{where}: {value!r:.40} is not one of {', '.join(allowed)}")


def _share(where: str, value: object) -> float | None:
    """A level or an alpha: strictly between 0 and 1 (0 and 1 are no test at all)."""
    figure = number(where, value, 0.0, 1.0, "in (0, 1)")
    if figure is not None and figure in (0.0, 1.0):
        raise BadFile(f"{where}: {value!r:.40} is impossible (in (0, 1))")
    return figure


def _paired_gate(gate: object) -> None:
    """The `[gate]` a paired run applied, as recorded (its types are the record model's)."""
    if gate is None:
        return
    if not isinstance(gate, Mapping):
        raise BadFile("paired.gate: expected an object")
    number("paired.gate.relative_drop", gate.get("relative_drop"), 0.0, 1.0, "in (0, 1)")
    number("paired.gate.absolute_drop", gate.get("absolute_drop"), 0.0, None, "above 0")
    for key in ("alpha", "beta"):
        share = _share(f"paired.gate.{key}", gate.get(key))
        if share is not None and share >= 0.5:
            raise BadFile(f"paired.gate.{key}: {gate.get(key)!r:.40} is impossible "
                          "(in (0, 0.5))")
    number("paired.gate.paired_sd", gate.get("paired_sd"), 0.0, None, "an sd is >= 0")


SPEEDUP_GATED = ("speedup_tpot", "speedup_throughput")
SPEEDUP_STATUSES = ("pass", "fail", "error")


def _paired_speedup(findings: object) -> None:
    """The paired speedup gate's findings (`[speedup] max_drop`): each figure once, a
    status, and a test's figures consistent (B / A, inside its interval), or the reason
    no test was made."""
    if findings is None:
        return
    if not isinstance(findings, list) or len(findings) > len(SPEEDUP_GATED):
        raise BadFile("paired.speedup: expected a list of at most "
                      f"{len(SPEEDUP_GATED)} findings")
    figures: set[str] = set()
    for i, found in enumerate(findings):
        here = f"paired.speedup[{i}]"
        if not isinstance(found, Mapping):
            raise BadFile(f"{here}: expected an object")
        _choice(f"{here}.figure", found.get("figure"), SPEEDUP_GATED)
        if found["figure"] in figures:
            raise BadFile(f"{here}.figure: {found['figure']} is given twice")
        figures.add(found["figure"])
        _choice(f"{here}.status", found.get("status"), SPEEDUP_STATUSES)
        if found.get("decision") is None:  # no test: only an error, saying why
            if found["status"] != "error":
                raise BadFile(f"{here}: status {found['status']} without a test")
            _text(f"{here}.reason", found.get("reason"))
            continue
        _choice(f"{here}.decision", found.get("decision"), DECISIONS)
        if found["status"] == "error":
            raise BadFile(f"{here}: a test was made, its status cannot be error")
        if (found["decision"] == "not_worse" and found["status"] != "pass") or \
                (found["decision"] == "worse" and found["status"] != "fail"):
            raise BadFile(f"{here}.status: {found['status']} contradicts decision "
                          f"{found['decision']}")
        if count(f"{here}.n", found.get("n")) is None or found["n"] < 2:
            raise BadFile(f"{here}.n: a test pairs at least 2 questions")
        a, b = (number(f"{here}.{key}", found.get(key), 0.0, SPEEDUP_TOP, "a speedup")
                for key in ("a", "b"))
        if not a or not b:
            raise BadFile(f"{here}: a and b are speedups above 0")
        ratio = number(f"{here}.ratio", found.get("ratio"), 0.0, None, "B / A")
        if ratio is None or not math.isclose(ratio, b / a, rel_tol=PRINTED):
            raise BadFile(f"{here}.ratio: {found.get('ratio')!r:.40} is not b / a "
                          f"({b / a:.6g})")
        interval(f"{here}.ratio_ci", found.get("ratio_ci"), 0.0, math.inf, ratio, "ratio")
        drop = _share(f"{here}.max_drop", found.get("max_drop"))
        alpha = _share(f"{here}.alpha", found.get("alpha"))
        if drop is None or alpha is None or alpha >= 0.5:
            raise BadFile(f"{here}: max_drop in (0, 1) and alpha in (0, 0.5) are required")
        _share(f"{here}.level", found.get("level"))


def check_paired(paired: object, top: float) -> None:
    """The paired gate's finding (`harness.protocols.pairing`) as every reader prints it."""
    if not isinstance(paired, Mapping):
        raise BadFile("paired: expected an object")
    _paired_speedup(paired.get("speedup"))
    _choice("paired.status", paired.get("status"), PAIRED_STATUSES)
    _choice("paired.floors_status", paired.get("floors_status"), FLOORS_STATUSES)
    _paired_gate(paired.get("gate"))
    against = paired.get("against")
    if not isinstance(against, Mapping):
        raise BadFile("paired.against: expected an object")
    _text("paired.against.run_id", against.get("run_id"))
    _text("paired.against.spec", against.get("spec"), required=False)
    _text("paired.against.path", against.get("path"), required=False)
    if not isinstance(against.get("reused"), bool):
        raise BadFile("paired.against.reused: expected true or false")
    r = paired.get("result")
    if not isinstance(r, Mapping):
        raise BadFile("paired.result: expected an object")
    _choice("paired.result.decision", r.get("decision"), DECISIONS)
    if count("paired.result.n", r.get("n")) is None:
        raise BadFile("paired.result.n: missing")
    a = accept("paired.result.a", r.get("a"), top)
    b = accept("paired.result.b", r.get("b"), top)
    if a is None or b is None:
        raise BadFile("paired.result: a and b are required")
    # stated figures agree with a and b (to the 4 decimals every reader prints)
    difference = number("paired.result.difference", r.get("difference"), -top, top)
    if difference is None or not math.isclose(difference, b - a, abs_tol=PRINTED):
        raise BadFile(f"paired.result.difference: {r.get('difference')!r:.40} is not b - a "
                      f"({b - a:.6g})")
    interval("paired.result.difference_ci", r.get("difference_ci"), -top, top, difference,
             "difference")
    relative = number("paired.result.relative_change", r.get("relative_change"), -1.0, top)
    if relative is None or not math.isclose(relative, difference / a, abs_tol=PRINTED):
        raise BadFile(f"paired.result.relative_change: {r.get('relative_change')!r:.40} is "
                      f"not (b - a) / a ({(b - a) / a:.6g})")
    if number("paired.result.tolerated_drop", r.get("tolerated_drop"), 0.0, top) is None:
        raise BadFile("paired.result.tolerated_drop: missing")
    for key in ("margin", "margin_se", "margin_sd", "lower", "upper"):
        number(f"paired.result.{key}", r.get(key))
    _share("paired.result.alpha", r.get("alpha"))
    if _share("paired.result.level", r.get("level")) is None:
        raise BadFile("paired.result.level: missing")
    _text("paired.result.tolerance", r.get("tolerance"))


def check_request_row(row: Mapping[str, object], step: StepBound | None) -> str | None:
    """Why a request row's counts are impossible for a verify step bounded by `step` (the
    record's settings, `checks.step_of`; None: settings unknown, the loosest), or None
    (types are `readers.request_problem`'s)."""
    tokens, steps = row["completion_tokens"], row["verify_steps"]
    step = step or UNKNOWN
    correct = row.get("correct_drafts")
    if not isinstance(tokens, int) or not isinstance(steps, int) \
            or not (correct is None or isinstance(correct, int)):  # request_problem's to say
        return "completion_tokens, verify_steps, correct_drafts: expected integers"
    if correct is not None and correct > steps * step.drafts:
        return (f"correct_drafts: {correct} is more than verify_steps {steps} can accept "
                f"({step.reason}: at most {step.drafts} drafts a step)")
    if tokens < steps:
        return (f"completion_tokens: {tokens} is below verify_steps {steps} (each verify "
                "step makes at least one token)")
    if tokens > steps * step.tokens + 1:
        return (f"completion_tokens: {tokens} is more than verify_steps {steps} can make "
                f"({step.reason}, and the prefill token)")
    for key in ("accept_length", "spec_accept_length"):
        value = row.get(key)
        if not _is_number(value):  # None, or (request_problem's to say) not a number
            continue
        own = tokens / steps if steps else 0.0
        if not math.isfinite(value) or not math.isclose(value, own, rel_tol=1e-6, abs_tol=1e-9):
            return f"{key}: {value!r:.40} is not completion_tokens / verify_steps ({own:.6g})"
    histogram = row.get("accept_histogram")
    if isinstance(histogram, list) and len(histogram) > MAX_POSITIONS:
        return f"accept_histogram: {len(histogram)} entries, more than {MAX_POSITIONS}"
    return timing_problem(row.get("timing"))


def check_target_alone_row(row: Mapping[str, object]) -> str | None:
    """Why a target-alone request row ([speedup]: a server without speculation) is
    impossible, or None: it has no verify step and no spec count."""
    if row.get("verify_steps") != 0:
        return f"verify_steps: {row.get('verify_steps')!r:.40} on a server without speculation"
    if row.get("correct_drafts") not in (None, 0) or row.get("accept_histogram") is not None:
        return "correct_drafts, accept_histogram: spec counts on a server without speculation"
    for key in ("accept_length", "spec_accept_length"):
        if row.get(key) not in (None, 0, 0.0):
            return f"{key}: {row.get(key)!r:.40} on a server without speculation"
    return timing_problem(row.get("timing"))


def check_record(data: object, raw: bytes | str | None = None) -> None:
    """Every check on a parsed run record: sizes (checks.check_sizes), the measurement's
    totals (checks.check_measurement), then every rule above (BadFile naming the field)."""
    check_sizes(data, raw)
    if isinstance(data, dict):
        check_measurement(data)
        check_figures(data)
