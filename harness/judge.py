"""Judge: a measurement against the suite's floors gives a verdict with reasons."""

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


def judge(measurement: Measurement | None, floors: Floors) -> Verdict:
    if measurement is None:
        return Verdict(status="error", reasons=["no measurement: accept length is missing"])
    if floors.accuracy is not None and measurement.accuracy is None:
        return Verdict(status="error", reasons=["accuracy floor set but no accuracy measured"])
    ci = measurement.accept_length_ci
    checks = [("accept length", measurement.accept_length, floors.accept_length,
               f"{measurement.accept_length:.4f}"
               + (f" (95% CI {ci[0]:.3f}-{ci[1]:.3f})" if ci else ""))]
    if floors.accuracy is not None and measurement.accuracy is not None:
        checks.append(("accuracy", measurement.accuracy, floors.accuracy,
                       f"{measurement.accuracy:.3f}"))
    relation = ">" if floors.strict else ">="
    reasons = []
    failed = False
    for name, value, floor, shown in checks:
        if _meets(value, floor, floors.strict):
            reasons.append(f"{name} {shown} {relation} floor {floor:g}")
        else:
            failed = True
            reasons.append(f"{name} {shown} is below the floor: needs {relation} {floor:g}")
    disagreement = measurement.server_disagreement
    if disagreement is not None and abs(disagreement) > DISAGREEMENT_TOLERANCE:
        reasons.append(
            f"note: server avg_spec_accept_length {measurement.server_accept_length:.4f} "
            f"differs from the exact figure by {disagreement:+.1%} (the server folds its "
            "figure in every --decode-log-interval steps; the exact figure is judged)"
        )
    elif measurement.server_accept_length is None:
        reasons.append("note: server reported no avg_spec_accept_length (cross-check skipped)")
    return Verdict(status="fail" if failed else "pass", reasons=reasons)
