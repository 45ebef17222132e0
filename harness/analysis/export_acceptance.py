"""Accept length as an export states it: every figure named by its definition and by how
it is aggregated, never a bare "acceptance".

Two aggregations of one definition can rank drafters differently (vllm-project/vllm
#42508): pooled over verify steps (sum of numerators / sum of verify steps, what the
harness judges floors in and what vLLM's /metrics and SGLang's /server_info report), and
the mean of per-request means (each request's numerator / its verify steps, averaged over
requests, as SpecForge and AIPerf's per-request `spec_decode_acceptance_length` average).
Both are given for the pooled definitions (`METRIC_DEFINITIONS`), beside the floors the
run was judged against, each with its definition's text. The mean of per-request means of
server_avg is the definition `per_request_mean` (vLLM's reference-acceptance test), one
figure however aggregated; each request's own value is `definitions.request_value`.
"""

from __future__ import annotations

from collections.abc import Sequence

from harness.metrics.definitions import METRICS, POOLED_METRICS, request_value
from harness.metrics.floor_checks import DEFINITIONS as FLOOR_DEFINITIONS
from harness.metrics.floor_checks import recorded_floor_checks
from harness.metrics.stats import MEAN_METRICS
from harness.results.record import RequestRow, RunRecord
from harness.suite.entries import METRIC_DEFINITIONS

POOLED = "pooled_over_verify_steps"
MEAN_OF_MEANS = "mean_of_per_request_means"
AGGREGATIONS: dict[str, str] = {
    POOLED: "sum over requests of the numerator / sum over requests of verify steps (every "
            "verify step weighs the same); what server_avg and per_request floors judge",
    MEAN_OF_MEANS: "each request's numerator / its verify steps, averaged over the requests "
                   "with at least one verify step (every request weighs the same; "
                   "vllm-project/vllm #42508)",
}


def mean_of_means(rows: Sequence[RequestRow], metric: str) -> float | None:
    """The unweighted mean over requests of each one's own figure under `metric`
    (`definitions.request_value`); for server_avg this is `per_request_mean`."""
    values = [v for row in rows if row.verify_steps
              if (v := request_value(row, metric)) is not None]
    return sum(values) / len(values) if values else None


def pooled(record: RunRecord, metric: str) -> float | None:
    """The record's own pooled figure under `metric` (never recomputed: the record's)."""
    measurement = record.measurement
    if measurement is None:
        return None
    if metric == measurement.metric:
        return measurement.accept_length
    return getattr(measurement, f"accept_length_{metric}", None)


def acceptance_block(record: RunRecord, rows: Sequence[RequestRow]) -> dict[str, object]:
    """Both definitions, both aggregations, the floors judged, each labelled."""
    measurement = record.measurement
    judged = measurement.metric if measurement is not None else None
    with_steps = [row for row in rows if row.verify_steps > 0]
    block: dict[str, object] = {
        "judged_definition": judged,
        "aggregations": dict(AGGREGATIONS),
        "requests_with_verify_steps": len(with_steps),
        "verify_steps": sum(row.verify_steps for row in rows),
    }
    for metric in POOLED_METRICS:
        block[metric] = {
            "definition": METRIC_DEFINITIONS[metric],
            POOLED: pooled(record, metric),
            MEAN_OF_MEANS: mean_of_means(rows, metric),
        }
    # the means are definitions of their own: one figure each (requests weigh 1), its CI
    for metric in MEAN_METRICS:
        ci = getattr(measurement, f"accept_length_{metric}_ci", None)
        block[metric] = {
            "definition": METRIC_DEFINITIONS[metric],
            "value": getattr(measurement, f"accept_length_{metric}", None),
            "ci": list(ci) if ci else None,
        }
    if measurement is not None and measurement.accept_length_ci is not None:
        judged_block = block[judged or "server_avg"]
        assert isinstance(judged_block, dict)
        judged_block["ci" if judged in MEAN_METRICS else f"{POOLED}_ci"] = list(
            measurement.accept_length_ci)
        block["ci_level"] = measurement.ci_level
    block["floors"] = floors_of(record)
    return block


def floors_of(record: RunRecord) -> list[dict[str, object]]:
    """The floors the record's suite declares, each as `<figure> (<definition>) <op>
    <floor>` with its definition's text; the accept-length floors hold the pooled figure."""
    measurement = record.measurement
    metric = measurement.metric if measurement is not None else "per_request"
    floors: list[dict[str, object]] = []
    for check in recorded_floor_checks(record.suite.document, metric):
        text = METRIC_DEFINITIONS.get(check.definition) or FLOOR_DEFINITIONS.get(
            check.definition, check.definition)
        aggregation = (POOLED if check.definition in POOLED_METRICS
                       else MEAN_OF_MEANS if check.definition in METRICS else None)
        floors.append({"floor": f"{check.key} ({check.definition}) {check.relation} "
                                f"{check.floor:g}",
                       "definition": check.definition, "definition_text": text,
                       "aggregation": aggregation, "value": check.floor})
    return floors
