"""Figures per DP rank and per node (harness.metrics.ranks): the ranks' counts add up to
the pooled ones exactly, every rank has a figure or the run is an error, and the server's
per-rank states are matched to ranks by the rank they name, else by value."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.engines.sglang.api import parse_generate, rank_states, server_figure
from harness.errors import EngineError, MissingMetric
from harness.metrics import ranks
from harness.metrics.definitions import accept_lengths
from harness.results.record import RequestRow


def row(index: int, rank: int | None, steps: int, drafts: int, tokens: int | None = None
        ) -> RequestRow:
    tokens = 1 + drafts + steps if tokens is None else tokens
    return RequestRow(index=index, question_index=index, completion_tokens=tokens,
                      verify_steps=steps, correct_drafts=drafts, dp_rank=rank,
                      spec_accept_length=tokens / steps if steps else 0.0, latency_s=0.1)


requests = st.lists(st.tuples(st.integers(0, 3), st.integers(1, 40), st.integers(0, 200),
                              st.integers(0, 5)), min_size=4, max_size=60)


@settings(max_examples=200, deadline=None)
@given(requests)
def test_rank_counts_add_up_to_the_pooled_counts_exactly(spec: list[tuple[int, int, int, int]]
                                                         ) -> None:
    rows = [row(i, i % 4 if i < 4 else rank, steps, min(drafts, steps * 7), None if cut == 0
                else max(1, 1 + min(drafts, steps * 7) + steps - cut))
            for i, (rank, steps, drafts, cut) in enumerate(spec)]
    parts = ranks.by_rank(rows, 4)
    pooled = accept_lengths(rows)
    assert sum(p.n_requests for p in parts) == len(rows)
    assert sum(p.verify_steps for p in parts) == sum(r.verify_steps for r in rows)
    assert sum(p.completion_tokens for p in parts) == sum(r.completion_tokens for r in rows)
    for metric in ("server_avg", "per_request"):
        weighted = sum(getattr(p, f"accept_length_{metric}") * p.verify_steps for p in parts)
        assert weighted / sum(p.verify_steps for p in parts) == pytest.approx(
            pooled[metric], rel=1e-12)


def test_a_rank_that_served_nothing_is_an_error() -> None:
    rows = [row(0, 0, 3, 5), row(1, 0, 4, 2)]
    with pytest.raises(MissingMetric, match="DP rank 1 served none"):
        ranks.by_rank(rows, 2)


def test_a_request_without_its_rank_is_an_error() -> None:
    with pytest.raises(MissingMetric, match="did not say which DP rank"):
        ranks.by_rank([row(0, 0, 3, 5), row(1, None, 4, 2)], 2)


def test_a_rank_outside_the_topology_is_an_error() -> None:
    with pytest.raises(MissingMetric, match="served by DP rank 2"):
        ranks.by_rank([row(0, 0, 3, 5), row(1, 2, 4, 2)], 2)


def test_a_rank_with_no_verify_step_is_an_error() -> None:
    with pytest.raises(MissingMetric, match="DP rank 1 made no verify step"):
        ranks.by_rank([row(0, 0, 3, 5), row(1, 1, 0, 0, tokens=1)], 2)


def test_nodes_pool_their_ranks() -> None:
    rows = [row(i, i % 4, 2 + i, i) for i in range(8)]
    parts = ranks.by_rank(rows, 4, node_of=lambda rank: rank // 2)
    nodes = ranks.by_node(rows, parts)
    assert nodes is not None and [n.ranks for n in nodes] == [[0, 1], [2, 3]]
    assert sum(n.verify_steps for n in nodes) == sum(r.verify_steps for r in rows)
    spans = ranks.by_rank(rows, 4, node_of=lambda rank: None)
    assert ranks.by_node(rows, spans) is None  # a rank on several nodes: no node figure


def _parts() -> list:
    return ranks.by_rank([row(0, 0, 10, 20), row(1, 1, 10, 5)], 2)  # 3.0 and 1.5


def test_server_states_matched_by_the_rank_they_name() -> None:
    parts = _parts()
    how = ranks.match_server(parts, [(1, 1.5), (0, 3.0)])
    assert how == ranks.MATCH_BY_ID
    assert [p.server_reported_accept_length for p in parts] == [3.0, 1.5]


def test_server_states_without_rank_ids_are_matched_by_value() -> None:
    parts = _parts()
    how = ranks.match_server(parts, [(None, 1.5), (None, 3.0)])  # replies in any order
    assert how == ranks.MATCH_BY_VALUE
    assert [p.server_reported_accept_length for p in parts] == [3.0, 1.5]
    assert ranks.pooled_server_figure(parts) == pytest.approx((30 + 15) / 20)


def test_server_rank_evidence_missing_or_short_is_an_error() -> None:
    with pytest.raises(EngineError, match="lists 1 rank states"):
        ranks.match_server(_parts(), [(None, 3.0)])
    with pytest.raises(EngineError, match=r"internal_states\[1\] reports no"):
        ranks.match_server(_parts(), [(None, 3.0), (None, None)])
    assert ranks.match_server(_parts(), [(None, None), (None, None)]) is None
    assert ranks.match_server(_parts(), None) is None


def test_a_disagreeing_rank_is_named() -> None:
    parts = _parts()
    ranks.match_server(parts, [(0, 3.0), (1, 1.8)])
    notes = ranks.disagreements(parts, 0.05)
    assert len(notes) == 1 and "DP rank 1" in notes[0]


def test_sglang_states_and_meta_info_ranks_are_read() -> None:
    info = {"internal_states": [{"avg_spec_accept_length": 2.5}, {"dp_rank": 1},
                                {"spec_counter_dp_rank": 2, "avg_spec_accept_length": 1}]}
    assert rank_states(info) == [(None, 2.5), (1, None), (2, 1.0)]
    assert server_figure(info) is None  # several ranks: no one figure is the server's
    assert server_figure({"internal_states": [{"avg_spec_accept_length": 2.5}]}) == 2.5
    assert rank_states({"internal_states": "x"}) is None
    meta = {"completion_tokens": 5, "spec_verify_ct": 2, "spec_num_correct_drafts": 2}
    assert parse_generate({"text": "", "meta_info": {**meta, "dp_rank": 3}}).dp_rank == 3
    for odd in ("1", True, -1, 1.0, None):
        assert parse_generate({"text": "", "meta_info": {**meta, "dp_rank": odd}}).dp_rank \
            is None


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() |
                           st.text(max_size=5),
                           lambda inner: st.lists(inner, max_size=4) |
                           st.dictionaries(st.text(max_size=25), inner, max_size=4),
                           max_leaves=20)


@settings(max_examples=300, deadline=None)
@given(st.one_of(json_values, st.fixed_dictionaries({"internal_states": json_values})))
def test_any_server_info_is_read_or_refused_as_an_engine_error(info: object) -> None:
    states = rank_states(info)
    assert states is None or all(figure is None or isinstance(figure, float)
                                 for _, figure in states)
    with contextlib.suppress(EngineError):  # the one way it may refuse
        ranks.match_server(_parts(), states)
