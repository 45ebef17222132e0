"""Every figure per data-parallel rank and per node, beside the pooled one.

Under data parallelism each DP rank is a scheduler of its own with its own counters
(SGLang: `/server_info` `internal_states`, one state per rank; `meta_info.dp_rank` names
the rank that served a request). A rank's figure, in both definitions
(`harness.metrics.definitions`), is formed from the counts of the requests it served, so
the ranks' counts add up exactly to the pooled counts, and the pooled figure is the ranks'
figures weighted by their verify steps; `by_rank` checks both, in integers. A node's
figure pools the ranks whose schedulers run on it (`node_of`).

Missing evidence is an error, never a pass: a request that does not say which rank served
it, a rank that served no measured request, a rank with no verify step, a server that
lists another number of rank states than the topology has ranks, or a server that reports
a figure for some ranks and not for others.

The server's states are matched to ranks by the rank they name where they name one;
SGLang 0.5.23's name none and arrive in the order the ranks answered
(`managers/communicator.py`, FanOutCommunicator), so there they are matched by value: the
ranks' exact figures and the states' figures are paired in sorted order (the pairing that
minimises the total difference), and the record says so (`server_rank_match`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from harness.errors import EngineError, MissingMetric
from harness.metrics.definitions import numerators
from harness.results.record import Measurement, RankResult, RequestRow

MATCH_BY_ID = "by rank id"
MATCH_BY_VALUE = ("by value: the server's states name no rank (SGLang lists them in the "
                  "order the ranks answered); sorted figures paired")


def _result(rank: int, rows: Sequence[RequestRow], node: int | None = None,
            ranks: list[int] | None = None) -> RankResult:
    steps = sum(row.verify_steps for row in rows)
    what = f"node {rank}" if ranks is not None else f"DP rank {rank}"
    if steps == 0:
        raise MissingMetric(f"{what} made no verify step in {len(rows)} measured requests: "
                            "no accept length of its own")
    correct = [row.correct_drafts for row in rows if row.verify_steps]
    return RankResult(
        rank=rank, node=node, ranks=ranks, n_requests=len(rows),
        completion_tokens=sum(row.completion_tokens for row in rows), verify_steps=steps,
        correct_drafts=sum(c for c in correct if c is not None) if None not in correct
        else None,
        accept_length_server_avg=sum(numerators(rows, "server_avg")) / steps,
        accept_length_per_request=sum(numerators(rows, "per_request")) / steps)


def by_rank(rows: Sequence[RequestRow], dp_ranks: int,
            node_of: Callable[[int], int | None] = lambda _rank: 0) -> list[RankResult]:
    """Each DP rank's figures over the requests it served; the counts must add up to the
    pooled ones exactly (else EngineError: rows were lost or counted twice)."""
    grouped: dict[int, list[RequestRow]] = {rank: [] for rank in range(dp_ranks)}
    for row in rows:
        if row.dp_rank is None:
            raise MissingMetric(f"request {row.index}: the server did not say which DP rank "
                                "served it (meta_info.dp_rank): no per-rank figure can be "
                                f"formed for a topology of {dp_ranks} DP ranks")
        if row.dp_rank not in grouped:
            raise MissingMetric(f"request {row.index}: served by DP rank {row.dp_rank}, but the "
                                f"topology has {dp_ranks} (ranks 0-{dp_ranks - 1})")
        grouped[row.dp_rank].append(row)
    idle = [rank for rank, served in grouped.items() if not served]
    if idle:
        raise MissingMetric(f"DP rank {idle[0]} served none of the {len(rows)} measured "
                            "requests: it has no figure of its own (too few requests for "
                            f"{dp_ranks} ranks, or the server routed none to it)")
    results = [_result(rank, served, node_of(rank)) for rank, served in grouped.items()]
    check_sums(results, rows)
    return results


def check_sums(parts: Sequence[RankResult], rows: Sequence[RequestRow]) -> None:
    """The parts' counts sum exactly to the pooled counts (integers, no rounding), so the
    pooled figure is exactly the parts' figures weighted by their verify steps."""
    pooled = {"n_requests": len(rows), "verify_steps": sum(r.verify_steps for r in rows),
              "completion_tokens": sum(r.completion_tokens for r in rows)}
    for key, total in pooled.items():
        summed = sum(getattr(part, key) for part in parts)
        if summed != total:
            raise EngineError(f"the per-rank {key} add up to {summed}, the run's are {total}")
    steps = pooled["verify_steps"]
    for metric in ("server_avg", "per_request"):
        numerator = sum(numerators(rows, metric))
        parts_numerator = sum(round(getattr(part, f"accept_length_{metric}")
                                    * part.verify_steps) for part in parts)
        if parts_numerator != numerator:
            raise EngineError(f"the per-rank {metric} numerators add up to {parts_numerator}, "
                              f"the run's is {numerator} (over {steps} verify steps)")


def by_node(rows: Sequence[RequestRow], ranks: Sequence[RankResult]) -> list[RankResult] | None:
    """Each node's figures: its ranks' requests pooled (None when a rank spans nodes)."""
    if any(rank.node is None for rank in ranks):
        return None
    nodes: dict[int, list[int]] = {}
    for rank in ranks:
        nodes.setdefault(int(rank.node or 0), []).append(rank.rank)
    results = [_result(node, [row for row in rows if row.dp_rank in members], ranks=members)
               for node, members in sorted(nodes.items())]
    check_sums(results, rows)
    return results


def match_server(ranks: list[RankResult],
                 states: Sequence[tuple[int | None, float | None]] | None) -> str | None:
    """Put each rank's `/server_info` figure on its RankResult; return how the states were
    matched to ranks (None when the server reports no figure at all)."""
    if states is None or all(figure is None for _, figure in states):
        return None
    if len(states) != len(ranks):
        raise EngineError(f"/server_info lists {len(states)} rank states (internal_states), "
                          f"the topology has {len(ranks)} DP ranks")
    silent = [i for i, (_, figure) in enumerate(states) if figure is None]
    if silent:
        raise EngineError(f"/server_info internal_states[{silent[0]}] reports no "
                          "avg_spec_accept_length while other ranks do: that rank's figure "
                          "cannot be cross-checked (SGLang folds it every "
                          "--decode-log-interval decode batches; set it to 1)")
    named = [rank for rank, _ in states if rank is not None]
    if len(named) == len(states) and sorted(named) == [rank.rank for rank in ranks]:
        figures = dict(states)
        for rank in ranks:
            rank.server_reported_accept_length = figures[rank.rank]
        return MATCH_BY_ID
    ordered = sorted(ranks, key=lambda rank: rank.accept_length_server_avg)
    for rank, figure in zip(ordered, sorted(float(f) for _, f in states if f is not None),
                            strict=True):
        rank.server_reported_accept_length = figure
    return MATCH_BY_VALUE


def pooled_server_figure(ranks: Sequence[RankResult]) -> float | None:
    """The server's per-rank figures pooled with each rank's verify steps (SGLang reports
    no pooled figure under data parallelism): comparable with the exact pooled server_avg."""
    if any(rank.server_reported_accept_length is None for rank in ranks):
        return None
    steps = sum(rank.verify_steps for rank in ranks)
    return sum(float(rank.server_reported_accept_length or 0.0) * rank.verify_steps
               for rank in ranks) / steps


def disagreements(ranks: Sequence[RankResult], tolerance: float) -> list[str]:
    """A note per rank whose server figure differs from its exact one by more than
    `tolerance` (relative)."""
    notes = []
    for rank in ranks:
        reported = rank.server_reported_accept_length
        if reported is None:
            continue
        relative = (reported - rank.accept_length_server_avg) / rank.accept_length_server_avg
        if abs(relative) > tolerance:
            notes.append(f"note: DP rank {rank.rank}: the server's avg_spec_accept_length "
                         f"{reported:.4f} differs from the exact server_avg "
                         f"{rank.accept_length_server_avg:.4f} by {relative:+.1%}")
    return notes


def summary(measurement: Measurement) -> list[str]:
    """Lines for the verdict: each rank's and node's figure beside the pooled one."""
    if not measurement.per_rank:
        return []
    metric = measurement.metric
    lines = []
    for label, parts in (("DP rank", measurement.per_rank),
                         ("node", measurement.per_node or [])):
        for part in parts:
            own = getattr(part, f"accept_length_{metric}")
            server = part.server_reported_accept_length
            cross = f"; server {server:.4f}" if server is not None and label == "DP rank" \
                else ""
            lines.append(f"{label} {part.rank}: accept length ({metric}) {own:.4f} over "
                         f"{part.n_requests} requests, {part.verify_steps} verify steps"
                         f"{cross}")
    return lines
