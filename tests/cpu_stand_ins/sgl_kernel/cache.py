"""KV-cache index ops: where each request's tokens live in the token pool.

Contracts: `sglang/srt/mem_cache/allocation.py` (`assign_req_to_token_pool`),
`sglang/kernels/ops/speculative/cache_locs.py` (`assign_extend_cache_locs`,
`assign_draft_cache_locs_contiguous`, `generate_draft_decode_kv_indices`) and
`sglang/kernels/ops/kvcache/cache_move.py` (`copy_all_layer_kv_cache_tiled`).
"""

from __future__ import annotations

import ctypes

import torch


def _spans(start: torch.Tensor, end: torch.Tensor) -> list[tuple[int, int, int]]:
    """(start, end, offset in the packed output) per request: requests are packed in order."""
    spans, offset = [], 0
    for first, last in zip(start.tolist(), end.tolist(), strict=True):
        spans.append((int(first), int(last), offset))
        offset += int(last) - int(first)
    return spans


def assign_req_to_token_pool_cpu(req_pool_indices: torch.Tensor, req_to_token: torch.Tensor,
                                 start_offset: torch.Tensor, end_offset: torch.Tensor,
                                 out_cache_loc: torch.Tensor, pool_len: int) -> None:
    """req_to_token[pool[b], start[b]:end[b]] = the b-th packed run of out_cache_loc."""
    for b, (first, last, offset) in enumerate(_spans(start_offset, end_offset)):
        row = int(req_pool_indices[b])
        req_to_token[row, first:last] = out_cache_loc[offset:offset + last - first].to(
            req_to_token.dtype)


def assign_extend_cache_locs_cpu(req_pool_indices: torch.Tensor, req_to_token: torch.Tensor,
                                 start_offset: torch.Tensor, end_offset: torch.Tensor,
                                 out_cache_loc: torch.Tensor, pool_len: int) -> None:
    """The reverse: the b-th packed run of out_cache_loc = req_to_token[pool[b], start:end]."""
    for b, (first, last, offset) in enumerate(_spans(start_offset, end_offset)):
        row = int(req_pool_indices[b])
        out_cache_loc[offset:offset + last - first] = req_to_token[row, first:last].to(
            out_cache_loc.dtype)


def assign_draft_cache_locs_contiguous_cpu(req_pool_indices: torch.Tensor,
                                           req_to_token: torch.Tensor, seq_lens: torch.Tensor,
                                           out_cache_loc: torch.Tensor, pool_len: int,
                                           topk: int, speculative_num_steps: int) -> None:
    """Each request's topk * steps slots from seq_lens[b] on, packed in request order."""
    width = topk * speculative_num_steps
    for b, seq_len in enumerate(seq_lens.tolist()):
        row = int(req_pool_indices[b])
        out_cache_loc[b * width:(b + 1) * width] = req_to_token[
            row, int(seq_len):int(seq_len) + width].to(out_cache_loc.dtype)


def build_draft_decode_metadata_cpu(req_to_token: torch.Tensor, req_pool_indices: torch.Tensor,
                                    seq_lens: torch.Tensor, topk: int, num_steps: int,
                                    pool_len: int) -> torch.Tensor:
    """A req_to_token table with one row per (request, candidate), row b * topk + t: the
    request's prefix, then candidate t's draft slots, which lie at seq_len + t * num_steps
    on (page size 1; `generate_draft_decode_kv_indices`). Columns past them stay 0."""
    rows = seq_lens.shape[0] * topk
    table = torch.zeros((rows, pool_len), dtype=req_to_token.dtype)
    for b, seq_len in enumerate(int(s) for s in seq_lens.tolist()):
        source = req_to_token[int(req_pool_indices[b])]
        for t in range(topk):
            row = table[b * topk + t]
            row[:seq_len] = source[:seq_len]
            first = seq_len + t * num_steps
            steps = max(0, min(num_steps, pool_len - seq_len, pool_len - first))
            row[seq_len:seq_len + steps] = source[first:first + steps]
    return table


def copy_all_layer_kv_cache_cpu(data_ptrs: torch.Tensor, strides: torch.Tensor,
                                tgt_loc: torch.Tensor, src_loc: torch.Tensor) -> None:
    """For every buffer (base address data_ptrs[i], row size strides[i] bytes), copy row
    src_loc[j] to row tgt_loc[j]. All source rows are read before any is written, as the
    tiled kernel's one load then one store per tile ("safe for in-place copy")."""
    pairs = list(zip(src_loc.tolist(), tgt_loc.tolist(), strict=True))
    for base, stride in zip(data_ptrs.tolist(), strides.tolist(), strict=True):
        rows = [ctypes.string_at(base + src * stride, stride) for src, _ in pairs]
        for (_, tgt), data in zip(pairs, rows, strict=True):
            ctypes.memmove(base + tgt * stride, data, stride)
