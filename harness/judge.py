"""Judge: a measurement against the suite's floors gives a verdict with reasons.

Every floor is checked and a failed floor of any kind stands: the accept-length check is
the point estimate against the floor, or, when a run stopped sequentially, the
sequential rule's decision; accuracy is judged on the same requests. The accept length
is judged in the definition the suite's floors were taken in (`floors.metric`), and
the reasons name it. A partial run (it ended before its plan) is never a pass.
"""

from __future__ import annotations

from harness.errors import ExitCode
from harness.measure import DISAGREEMENT_TOLERANCE
from harness.record import Measurement, Verdict, VerdictStatus
from harness.suite import Floors

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
    relation = ">" if floors.strict else ">="
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
        if _meets(measurement.accuracy, floors.accuracy, floors.strict):
            reasons.append(f"accuracy {measurement.accuracy:.3f} {relation} floor "
                           f"{floors.accuracy:g}")
        else:
            failed = True
            reasons.append(f"accuracy {measurement.accuracy:.3f} is below the floor: needs "
                           f"{relation} {floors.accuracy:g}")
    reasons.extend(_cross_check_notes(measurement))
    return Verdict(status="fail" if failed else "pass", reasons=reasons)


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
