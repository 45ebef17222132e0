"""Judge: a measurement against the suite's floors gives a verdict with reasons.

Every floor is checked and a failed floor of any kind stands: the accept-length check is
the point estimate against the floor, or, when a run stopped sequentially, the
sequential rule's decision; accuracy is judged on the same requests. Category floors
(`floors.categories`) judge each named category's own figure and accuracy, and position
floors (`floors.positions`) the rate at which each draft position is accepted, both as
point estimates. Each floor has its own strictness, as the gate it was taken from states
it (`floors.strict` for accept length, `accuracy_strict`, `positions_strict`, and a
category floor's own `strict`). A floor on a category the run did not measure is an error,
never a pass; a position floor beyond the positions of a present histogram is judged at
rate 0 (SGLang sizes each histogram by the largest accepted count, so a draft that never
reaches position k reports fewer than k positions: a broken draft fails); only a run
where no request carries a histogram cannot judge a position floor (an error). The accept length
is judged in the definition the suite's floors were taken in (`floors.metric`), and
the reasons name it. A partial run (it ended before its plan) is never a pass.
"""

from __future__ import annotations

from harness.errors import ExitCode
from harness.metrics.measure import DISAGREEMENT_TOLERANCE
from harness.results.record import Measurement, Verdict, VerdictStatus
from harness.suite.model import Floors

EXIT_CODES: dict[VerdictStatus, ExitCode] = {
    "pass": ExitCode.PASS,
    "fail": ExitCode.BELOW_FLOOR,
    "error": ExitCode.ENGINE_ERROR,
    "skipped": ExitCode.SKIPPED,
}


def _meets(value: float, floor: float, strict: bool) -> bool:
    return value > floor if strict else value >= floor


def judge(measurement: Measurement | None, floors: Floors,
          sequential: str | None = None) -> Verdict:
    """`sequential`: the sequential rule's decision on the measured requests, if one ran."""
    if measurement is None:
        return Verdict(status="error", reasons=["no measurement: accept length is missing"])
    if measurement.partial:
        return Verdict(status="error", reasons=[
            f"partial run: {measurement.n_requests} of {measurement.n_planned} requests "
            "finished; a partial run is never judged"])
    if measurement.metric != floors.metric:
        return Verdict(status="error", reasons=[
            f"measured in metric {measurement.metric!r} but the floors use "
            f"{floors.metric!r}: definitions are never mixed"])
    if floors.accuracy is not None and measurement.accuracy is None:
        return Verdict(status="error", reasons=["accuracy floor set but no accuracy measured"])
    relation = _relation(floors.strict)
    ci = measurement.accept_length_ci
    shown = (f"accept length ({floors.metric}) {measurement.accept_length:.4f}"
             + (f" (95% CI {ci[0]:.3f}-{ci[1]:.3f})" if ci else ""))
    reasons: list[str] = []
    failed = False
    if sequential is not None:
        failed = sequential != "pass"
        word = "settles above" if not failed else "settles below"
        reasons.append(f"{shown}: the sequential rule {word} the floor {floors.accept_length:g} "
                       f"after {measurement.n_requests} of {measurement.n_planned} requests")
    elif _meets(measurement.accept_length, floors.accept_length, floors.strict):
        reasons.append(f"{shown} {relation} floor {floors.accept_length:g}")
    else:
        failed = True
        reasons.append(f"{shown} is below the floor: needs {relation} {floors.accept_length:g}")
    if floors.accuracy is not None and measurement.accuracy is not None:
        shown_accuracy = f"accuracy {measurement.accuracy:.3f}"
        accuracy_relation = _relation(floors.accuracy_strict)
        if _meets(measurement.accuracy, floors.accuracy, floors.accuracy_strict):
            reasons.append(f"{shown_accuracy} {accuracy_relation} floor {floors.accuracy:g}")
        else:
            failed = True
            reasons.append(f"{shown_accuracy} is below the floor: needs "
                           f"{accuracy_relation} {floors.accuracy:g}")
    missing: list[str] = []
    for judged in (_category_floors(measurement, floors, missing),
                   _position_floors(measurement, floors, missing)):
        for ok, reason in judged:
            failed = failed or not ok
            reasons.append(reason)
    if missing:
        return Verdict(status="error", reasons=[*missing, *reasons])
    reasons.extend(_cross_check_notes(measurement))
    return Verdict(status="fail" if failed else "pass", reasons=reasons)


def _relation(strict: bool) -> str:
    return ">" if strict else ">="


def _category_floors(measurement: Measurement, floors: Floors,
                     missing: list[str]) -> list[tuple[bool, str]]:
    judged = []
    results = measurement.categories or {}
    for name, floor in floors.categories.items():
        relation = _relation(floor.strict)
        result = results.get(name)
        if result is None:
            missing.append(f"category {name!r} has a floor but no measured request "
                           f"(measured: {', '.join(results) or 'no categories'})")
            continue
        if floor.accept_length is not None:
            if result.accept_length is None:
                missing.append(f"category {name!r}: no accept length (no verify step)")
            else:
                ci = result.accept_length_ci
                shown = (f"category {name} accept length {result.accept_length:.4f}"
                         + (f" (95% CI {ci[0]:.3f}-{ci[1]:.3f})" if ci else "")
                         + f", {result.n_prompts} prompts")
                ok = _meets(result.accept_length, floor.accept_length, floor.strict)
                judged.append((ok, f"{shown} {relation} floor {floor.accept_length:g}" if ok
                               else f"{shown} is below its floor: needs {relation} "
                                    f"{floor.accept_length:g}"))
        if floor.accuracy is not None:
            if result.accuracy is None:
                missing.append(f"category {name!r} has an accuracy floor but is not graded")
            else:
                ok = _meets(result.accuracy, floor.accuracy, floor.strict)
                judged.append((ok, f"category {name} accuracy {result.accuracy:.3f} "
                               + (f"{relation} floor {floor.accuracy:g}" if ok else
                                  f"is below its floor: needs {relation} {floor.accuracy:g}")))
    return judged


def _position_floors(measurement: Measurement, floors: Floors,
                     missing: list[str]) -> list[tuple[bool, str]]:
    if not floors.positions:
        return []
    if not sum(measurement.accept_histogram or []):
        missing.append(f"{len(floors.positions)} position floors but no request carries an "
                       "accepted-draft histogram (spec_correct_drafts_histogram)")
        return []
    relation = _relation(floors.positions_strict)
    rates = measurement.per_position_acceptance or []
    cis = measurement.per_position_ci or []
    judged = []
    for k, floor in enumerate(floors.positions, start=1):
        if k > len(rates):
            # no verify step accepted k drafts: SGLang's histogram stops before position k
            rate, ci = 0.0, f" (no verify step reached position {k})"
        else:
            rate = rates[k - 1]
            ci = (f" (95% CI {cis[k - 1][0]:.3f}-{cis[k - 1][1]:.3f})" if k <= len(cis)
                  else "")
        ok = _meets(rate, floor, floors.positions_strict)
        judged.append((ok, f"P(position {k} accepted) {rate:.3f}{ci} "
                       + (f"{relation} floor {floor:g}" if ok
                          else f"is below its floor: needs {relation} {floor:g}")))
    return judged


def _cross_check_notes(measurement: Measurement) -> list[str]:
    reported = measurement.server_reported_accept_length
    disagreement = measurement.server_disagreement
    if reported is None:
        return ["note: the server reported no avg_spec_accept_length (cross-check skipped)"]
    if disagreement is not None and abs(disagreement) > DISAGREEMENT_TOLERANCE:
        return [f"note: the server's avg_spec_accept_length {reported:.4f} differs from the "
                f"exact server_avg figure by {disagreement:+.1%} (SGLang folds its figure in "
                "every --decode-log-interval iterations; the exact figure is judged)"]
    return []
