"""Checks of the sgl_kernel stand-in, each op against a plain torch computation.

Run by the SGLang CPU engine's interpreter (it has torch; the harness's does not):
`python tests/cpu_stand_ins/kernel_checks.py [NAME ...]` prints one JSON object,
check name -> "ok" or the failure. tests/sglang_cpu/test_kernel_stand_in.py runs it.
"""

from __future__ import annotations

import json
import sys
import traceback
from collections.abc import Callable
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

import sgl_kernel
from sgl_kernel import speculative

CHECKS: dict[str, Callable[[], None]] = {}


def check(fn: Callable[[], None]) -> Callable[[], None]:
    CHECKS[fn.__name__] = fn
    return fn


def _equal(actual: torch.Tensor, expected: torch.Tensor, what: str) -> None:
    if not torch.equal(actual, expected):
        raise AssertionError(f"{what}: {actual.tolist()} != {expected.tolist()}")


def _pool(rows: int = 4, width: int = 32) -> torch.Tensor:
    return torch.arange(rows * width, dtype=torch.int32).view(rows, width) + 1000


@check
def assign_req_to_token_pool() -> None:
    table = torch.zeros((4, 32), dtype=torch.int32)
    pools, start, end = torch.tensor([2, 0]), torch.tensor([3, 0]), torch.tensor([7, 2])
    locs = torch.tensor([11, 12, 13, 14, 21, 22], dtype=torch.int64)
    sgl_kernel.assign_req_to_token_pool_cpu(pools, table, start, end, locs, 32)
    expected = torch.zeros((4, 32), dtype=torch.int32)
    expected[2, 3:7] = torch.tensor([11, 12, 13, 14])
    expected[0, 0:2] = torch.tensor([21, 22])
    _equal(table, expected, "req_to_token")


@check
def assign_extend_cache_locs() -> None:
    table = _pool()
    pools, start, end = torch.tensor([1, 3]), torch.tensor([5, 0]), torch.tensor([9, 3])
    out = torch.empty(7, dtype=torch.int64)
    sgl_kernel.assign_extend_cache_locs_cpu(pools, table, start, end, out, 32)
    _equal(out, torch.cat([table[1, 5:9], table[3, 0:3]]).long(), "out_cache_loc")


@check
def assign_draft_cache_locs_contiguous() -> None:
    table, topk, steps = _pool(), 2, 3
    pools, seq_lens = torch.tensor([3, 1]), torch.tensor([4, 10])
    out = torch.empty(2 * topk * steps, dtype=torch.int64)
    sgl_kernel.assign_draft_cache_locs_contiguous_cpu(pools, table, seq_lens, out, 32, topk,
                                                      steps)
    _equal(out, torch.cat([table[3, 4:10], table[1, 10:16]]).long(), "out_cache_loc")


@check
def build_draft_decode_metadata() -> None:
    table, topk, steps = _pool(), 2, 3
    pools, seq_lens = torch.tensor([2, 0]), torch.tensor([5, 3])
    got = sgl_kernel.build_draft_decode_metadata_cpu(table, pools, seq_lens, topk, steps, 32)
    for b, (pool, seq_len) in enumerate([(2, 5), (0, 3)]):
        for t in range(topk):
            row = got[b * topk + t]
            draft = table[pool, seq_len + t * steps:seq_len + (t + 1) * steps]
            _equal(row[:seq_len + steps], torch.cat([table[pool, :seq_len], draft]),
                   f"row {b * topk + t}")


@check
def copy_all_layer_kv_cache() -> None:
    torch.manual_seed(0)
    buffers = [torch.randn(8, 2, 4), torch.randn(8, 2, 4)]
    expected = [b.clone() for b in buffers]
    src, tgt = torch.tensor([1, 2, 5]), torch.tensor([2, 1, 7])  # 1<->2 swap: in place
    for e in expected:
        e[tgt] = e[src].clone()
    ptrs = torch.tensor([b.data_ptr() for b in buffers], dtype=torch.int64)
    strides = torch.tensor([b[0].numel() * b.element_size() for b in buffers])
    sgl_kernel.copy_all_layer_kv_cache_cpu(ptrs, strides, tgt, src)
    for b, e in zip(buffers, expected, strict=True):
        _equal(b, e, "buffer")


@check
def fill_bonus_tokens() -> None:
    tokens = torch.tensor([[5, 6, 7, 8], [9, 10, 11, 12], [1, 2, 3, 4]])
    lens = torch.tensor([2, 4, 1])
    bonus = torch.zeros(3, dtype=torch.int64)
    sgl_kernel.fill_bonus_tokens_cpu(tokens, lens, bonus, 4)
    _equal(bonus, tokens.gather(1, (lens - 1).unsqueeze(1)).squeeze(1), "bonus")


@check
def fill_accept_out_cache_loc() -> None:
    index = torch.tensor([[0, 2, -1], [3, -1, -1], [6, 7, 8]])
    locs = torch.arange(100, 109)
    out = torch.full((9,), -7, dtype=torch.int64)
    sgl_kernel.fill_accept_out_cache_loc_cpu(index, locs, out)
    kept = locs[index[index >= 0]]
    _equal(out[:kept.numel()], kept, "accepted slots")
    _equal(out[kept.numel():], torch.full((9 - kept.numel(),), -7), "untouched tail")


def _chain_links(bs: int, n: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    index = torch.arange(bs * n).view(bs, n)
    following = torch.arange(1, n + 1).repeat(bs, 1)
    following[:, -1] = -1
    return index, following, torch.full((bs, n), -1)


@check
def verify_tree_greedy_chain() -> None:
    bs, n = 3, 4
    candidates = torch.tensor([[9, 1, 2, 3], [9, 1, 5, 3], [9, 4, 2, 3]])
    target = torch.tensor([[1, 2, 3, 7], [1, 2, 3, 7], [1, 2, 3, 7]])
    index, following, sibling = _chain_links(bs, n)
    predicts = torch.zeros(bs * n, dtype=torch.int64)
    accept_index = torch.full((bs, n), -1)
    accept_num = torch.zeros(bs, dtype=torch.int64)
    sgl_kernel.verify_tree_greedy_cpu(
        predicts=predicts, accept_index=accept_index, accept_token_num=accept_num,
        candidates=candidates, retrive_index=index, retrive_next_token=following,
        retrive_next_sibling=sibling, target_predict=target)
    # plain torch: a chain accepts the longest prefix where draft i+1 == target at i
    matches = (candidates[:, 1:] == target[:, :-1]).long().cumprod(dim=1)
    expected_num = matches.sum(dim=1)
    _equal(accept_num, expected_num, "accepted counts")
    for b in range(bs):
        k = int(expected_num[b])
        _equal(accept_index[b, :k + 1], index[b, :k + 1], f"accepted path {b}")
        _equal(predicts.view(bs, n)[b, :k + 1], target[b, :k + 1], f"predicts {b}")


@check
def verify_tree_greedy_siblings() -> None:
    # root 0 with children 1 and 2 (1 first), 2 has child 3; the target follows 0->2->3
    candidates = torch.tensor([[9, 4, 5, 6]])
    target = torch.tensor([[5, 0, 6, 8]])
    index = torch.arange(4).view(1, 4)
    following, sibling = torch.tensor([[1, -1, 3, -1]]), torch.tensor([[-1, 2, -1, -1]])
    predicts, accept_index = torch.zeros(4, dtype=torch.int64), torch.full((1, 4), -1)
    accept_num = torch.zeros(1, dtype=torch.int64)
    sgl_kernel.verify_tree_greedy_cpu(
        predicts=predicts, accept_index=accept_index, accept_token_num=accept_num,
        candidates=candidates, retrive_index=index, retrive_next_token=following,
        retrive_next_sibling=sibling, target_predict=target)
    _equal(accept_num, torch.tensor([2]), "accepted")
    _equal(accept_index, torch.tensor([[0, 2, 3, -1]]), "path")
    _equal(predicts, torch.tensor([5, 0, 6, 8]), "predicts")


def _tree_mask(parents: list[int]) -> torch.Tensor:
    """mask[i, j]: j is i or an ancestor of i."""
    n = len(parents)
    mask = torch.eye(n, dtype=torch.bool)
    for i in range(n):
        j = parents[i]
        while j >= 0:
            mask[i, j] = True
            j = parents[j]
    return mask


@check
def reconstruct_indices_from_tree_mask() -> None:
    parents = [-1, 0, 0, 1, 1, 2, 4]
    n = len(parents)
    mask = _tree_mask(parents)
    seq_lens = torch.tensor([10, 3])
    out = [torch.zeros(2 * n, dtype=torch.int64) for _ in range(4)]
    speculative.reconstruct_indices_from_tree_mask(
        torch.stack([mask, mask]).flatten(), seq_lens, *out, 2, n)
    positions, index, following, sibling = (o.view(2, n) for o in out)
    depth = mask.sum(dim=1) - 1
    _equal(positions, torch.stack([depth + 10, depth + 3]), "positions")
    _equal(index, torch.arange(2 * n).view(2, n), "retrieve_index")
    first_child = [next((k for k in range(n) if parents[k] == i), -1) for i in range(n)]
    next_sib = [next((k for k in range(i + 1, n) if parents[k] == parents[i]), -1)
                if parents[i] >= 0 else -1 for i in range(n)]
    _equal(following[0], torch.tensor(first_child), "first child")
    _equal(sibling[0], torch.tensor(next_sib), "next sibling")


@check
def build_tree_chain_matches_reconstruct() -> None:
    """topk 1 (STANDALONE's chain): positions seq_len + i, links i -> i + 1, a causal
    QLEN_ONLY mask; and reconstructing from that mask gives the same links."""
    bs, n, depth = 2, 4, 3
    seq_lens = torch.tensor([7, 12])
    parent_list = torch.tensor([[-1, 0, 1], [-1, 0, 1]])  # step s's parent: token s
    selected = torch.tensor([[0, 1, 2], [0, 1, 2]])  # the chain's 3 draft tokens
    mask = torch.zeros(bs * n * n, dtype=torch.bool)
    positions = torch.zeros(bs * n, dtype=torch.int64)
    index, following = torch.zeros(bs, n, dtype=torch.int64), torch.full((bs, n), -1)
    sibling = torch.full((bs, n), -1)
    sgl_kernel.build_tree_kernel_efficient_cpu(parent_list, selected, seq_lens, mask, positions,
                                               index, following, sibling, 1, depth, n, 1)
    _equal(positions.view(bs, n), seq_lens[:, None] + torch.arange(n), "positions")
    chain = torch.tensor([1, 2, 3, -1]).repeat(bs, 1)
    _equal(following, chain, "first child")
    _equal(sibling, torch.full((bs, n), -1), "siblings")
    causal = torch.tril(torch.ones(n, n, dtype=torch.bool))
    _equal(mask.view(bs, n, n), causal.repeat(bs, 1, 1), "mask")
    out = [torch.zeros(bs * n, dtype=torch.int64) for _ in range(4)]
    speculative.reconstruct_indices_from_tree_mask(mask, seq_lens, *out, bs, n)
    _equal(out[2].view(bs, n), following, "links from the mask")
    _equal(out[0], positions, "positions from the mask")


def _reference_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                         visible: torch.Tensor, scale: float) -> torch.Tensor:
    """torch's own SDPA, grouped kv heads expanded: q [T,H,D], k/v [S,Hkv,D]."""
    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
    out = torch.nn.functional.scaled_dot_product_attention(
        q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1), attn_mask=visible,
        scale=scale)
    return out.transpose(0, 1)


@check
def decode_attention() -> None:
    torch.manual_seed(1)
    heads, kv_heads, dim, slots = 4, 2, 8, 40
    k_cache, v_cache = torch.randn(slots, kv_heads, dim), torch.randn(slots, kv_heads, dim)
    table = torch.randperm(slots).view(2, 20).to(torch.int32)
    seq_lens, pools = torch.tensor([6, 11]), torch.tensor([1, 0])
    loc = torch.stack([table[1, 5], table[0, 10]]).long()  # the new token's slot
    q, k, v = torch.randn(2, heads, dim), torch.randn(2, kv_heads, dim), torch.randn(
        2, kv_heads, dim)
    out = torch.empty(2, heads, dim)
    expected_cache = k_cache.clone()
    expected_cache[loc] = k
    torch.ops.sgl_kernel.decode_attention_cpu(
        q, k_cache, v_cache, 1.0, 1.0, out, k, v, loc, torch.zeros(2, heads, 8, dim + 1),
        table, pools, seq_lens, 0.35, 0.0, False, 0, None, None)
    _equal(k_cache, expected_cache, "key written in-kernel")
    for b in range(2):
        slots_b = table[int(pools[b]), :int(seq_lens[b])].long()
        want = _reference_attention(q[b:b + 1], k_cache[slots_b], v_cache[slots_b],
                                    torch.ones(1, len(slots_b), dtype=torch.bool), 0.35)
        torch.testing.assert_close(out[b:b + 1], want, rtol=1e-5, atol=1e-5)


def _window_visible(q_positions: list[int], seq_len: int, window: int,
                    causal: bool) -> torch.Tensor:
    """FA3's window by its definition, element by element: left edge window - 1; right
    edge 0 when causal, window - 1 when bidirectional."""
    right = 0 if causal else window - 1
    return torch.tensor([[-right <= p - k <= window - 1 for k in range(seq_len)]
                         for p in q_positions], dtype=torch.bool)


def _window_extend_case(causal: bool) -> None:
    torch.manual_seed(3)
    heads, kv_heads, dim, window = 4, 2, 8, 3
    k_buffer, v_buffer = torch.randn(40, kv_heads, dim), torch.randn(40, kv_heads, dim)
    table = torch.randperm(40).view(2, 20).to(torch.int32)
    extend, seq_lens, pools = torch.tensor([5, 4]), torch.tensor([12, 4]), torch.tensor([1, 0])
    starts = torch.tensor([0, 5])
    q = torch.randn(9, heads, dim)
    out = torch.empty(9, heads, dim)
    torch.ops.sgl_kernel.extend_attention_cpu(
        q, None, None, out, k_buffer, v_buffer, 1.0, 1.0, table, pools, seq_lens, extend,
        starts, 5, 0.35, 0.0, False, window, None, None, None, causal)
    for b in range(2):
        seq_len, length, start = int(seq_lens[b]), int(extend[b]), int(starts[b])
        slots_b = table[int(pools[b]), :seq_len].long()
        prefix = seq_len - length
        visible = _window_visible(list(range(prefix, seq_len)), seq_len, window, causal)
        want = _reference_attention(q[start:start + length], k_buffer[slots_b],
                                    v_buffer[slots_b], visible, 0.35)
        torch.testing.assert_close(out[start:start + length], want, rtol=1e-5, atol=1e-5)
    if causal:
        return
    # the window is what changed the answer: without it, bidirectional attention differs
    wide = torch.empty(9, heads, dim)
    torch.ops.sgl_kernel.extend_attention_cpu(
        q, None, None, wide, k_buffer, v_buffer, 1.0, 1.0, table, pools, seq_lens, extend,
        starts, 5, 0.35, 0.0, False, 0, None, None, None, causal)
    assert not torch.allclose(wide, out), "the window made no difference"


@check
def extend_attention_sliding_causal() -> None:
    _window_extend_case(True)


@check
def extend_attention_sliding_bidirectional() -> None:
    _window_extend_case(False)


@check
def decode_attention_sliding() -> None:
    torch.manual_seed(4)
    heads, kv_heads, dim, window = 4, 2, 8, 4
    k_cache, v_cache = torch.randn(40, kv_heads, dim), torch.randn(40, kv_heads, dim)
    table = torch.randperm(40).view(2, 20).to(torch.int32)
    seq_lens, pools = torch.tensor([9, 3]), torch.tensor([0, 1])
    q = torch.randn(2, heads, dim)
    out = torch.empty(2, heads, dim)
    torch.ops.sgl_kernel.decode_attention_cpu(
        q, k_cache, v_cache, 1.0, 1.0, out, None, None, torch.zeros(2, dtype=torch.int64),
        torch.zeros(2, heads, 8, dim + 1), table, pools, seq_lens, 0.35, 0.0, False, window,
        None, None)
    for b in range(2):
        seq_len = int(seq_lens[b])
        slots_b = table[int(pools[b]), :seq_len].long()
        visible = _window_visible([seq_len - 1], seq_len, window, True)
        want = _reference_attention(q[b:b + 1], k_cache[slots_b], v_cache[slots_b], visible,
                                    0.35)
        torch.testing.assert_close(out[b:b + 1], want, rtol=1e-5, atol=1e-5)


def _extend_case(tree: torch.Tensor | None) -> None:
    torch.manual_seed(2)
    heads, kv_heads, dim, slots = 4, 2, 8, 40
    k_buffer, v_buffer = torch.randn(slots, kv_heads, dim), torch.randn(slots, kv_heads, dim)
    table = torch.randperm(slots).view(2, 20).to(torch.int32)
    extend, seq_lens, pools = torch.tensor([4, 4]), torch.tensor([9, 6]), torch.tensor([0, 1])
    starts = torch.tensor([0, 4])
    q = torch.randn(8, heads, dim)
    k_new = torch.cat([k_buffer[table[0, 5:9].long()], k_buffer[table[1, 2:6].long()]])
    v_new = torch.cat([v_buffer[table[0, 5:9].long()], v_buffer[table[1, 2:6].long()]])
    out = torch.empty(8, heads, dim)
    torch.ops.sgl_kernel.extend_attention_cpu(
        q, k_new, v_new, out, k_buffer, v_buffer, 1.0, 1.0, table, pools, seq_lens, extend,
        starts, 4, 0.35, 0.0, False, 0, None, None, tree, True)
    for b in range(2):
        seq_len, length = int(seq_lens[b]), int(extend[b])
        slots_b = table[int(pools[b]), :seq_len].long()
        visible = torch.ones(length, seq_len, dtype=torch.bool)
        own = (tree.view(2, length, length)[b] if tree is not None
               else torch.tril(torch.ones(length, length, dtype=torch.bool)))
        visible[:, seq_len - length:] = own
        want = _reference_attention(q[b * 4:(b + 1) * 4], k_buffer[slots_b], v_buffer[slots_b],
                                    visible, 0.35)
        torch.testing.assert_close(out[b * 4:(b + 1) * 4], want, rtol=1e-5, atol=1e-5)


@check
def extend_attention_causal() -> None:
    _extend_case(None)


@check
def extend_attention_tree_mask() -> None:
    mask = _tree_mask([-1, 0, 0, 1])
    _extend_case(torch.stack([mask, _tree_mask([-1, 0, 1, 2])]).flatten())


@check
def records_what_it_received() -> None:
    """With HARNESS_ATTENTION_RECORD set, one line per distinct (layer, kernel, causal,
    window), the layer taken from the caller's `layer` argument as the backend passes it."""
    import os
    import tempfile
    import types

    q = torch.randn(3, 2, 4)
    buffers = torch.randn(8, 1, 4), torch.randn(8, 1, 4)
    table = torch.arange(8, dtype=torch.int32).view(1, 8)

    def forward_extend(layer: object, window: int, causal: bool) -> None:  # as the backend
        torch.ops.sgl_kernel.extend_attention_cpu(
            q, None, None, torch.empty_like(q), *buffers, 1.0, 1.0, table, torch.tensor([0]),
            torch.tensor([5]), torch.tensor([3]), torch.tensor([0]), 3, 0.5, 0.0, False,
            window, None, None, None, causal)

    with tempfile.TemporaryDirectory() as scratch:
        path = os.path.join(scratch, "attention.jsonl")
        os.environ["HARNESS_ATTENTION_RECORD"] = path
        try:
            first, second = types.SimpleNamespace(layer_id=0), types.SimpleNamespace(layer_id=1)
            for _ in range(2):  # repeated calls: recorded once
                forward_extend(first, 16, True)
                forward_extend(second, 0, False)
        finally:
            del os.environ["HARNESS_ATTENTION_RECORD"]
        with open(path, encoding="utf-8") as lines:
            rows = [json.loads(line) for line in lines]
    got = [(r["layer"], r["kernel"], r["causal"], r["window"]) for r in rows]
    assert got == [(0, "extend", True, 16), (1, "extend", False, None)], got


@check
def refuses_what_it_does_not_implement() -> None:
    q = torch.zeros(1, 2, 4)
    try:
        torch.ops.sgl_kernel.decode_attention_cpu(
            q, torch.zeros(4, 1, 4), torch.zeros(4, 1, 4), 1.0, 1.0, torch.empty_like(q), None,
            None, torch.zeros(1, dtype=torch.int64), torch.zeros(1, 2, 8, 5),
            torch.zeros(1, 4, dtype=torch.int32), torch.zeros(1, dtype=torch.int64),
            torch.ones(1, dtype=torch.int64), 1.0, 0.0, False, 16, None, torch.zeros(2))
    except NotImplementedError:
        return
    raise AssertionError("attention sinks were accepted")


@check
def fused_sigmoid_mul() -> None:
    """Muse Glimmer's attention output gate: x <- x * sigmoid(gate), in place, in x's dtype."""
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(5, 8, generator=generator).to(torch.bfloat16)
    gate = torch.randn(5, 8, generator=generator).to(torch.bfloat16)
    expected = (x.float() * torch.sigmoid(gate.float())).to(torch.bfloat16)
    torch.ops.sgl_kernel.fused_sigmoid_mul_cpu(x, gate)
    _equal(x, expected, "gated output")


@check
def torchvision_placeholder_in_a_type_union() -> None:
    """transformers' video processors annotate `PILImageResampling | InterpolationMode |
    int` at class definition; the stand-in's placeholder must take part in the union."""
    import enum

    from torchvision.transforms import InterpolationMode

    class Resampling(enum.IntEnum):
        NEAREST = 0

    assert (Resampling | InterpolationMode | int | None) is not None
    assert (InterpolationMode | int) is not None
    try:
        InterpolationMode.BICUBIC()
    except NotImplementedError:
        return
    raise AssertionError("a torchvision placeholder was callable")


def main(names: list[str]) -> int:
    results = {}
    for name in names or list(CHECKS):
        try:
            CHECKS[name]()
            results[name] = "ok"
        except Exception:  # report every check, not just the first failure
            results[name] = traceback.format_exc(limit=3)
    print(json.dumps(results))
    return 0 if all(v == "ok" for v in results.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
