"""Speculative-decoding tree ops: build the draft tree, verify it greedily, commit.

Contracts: `sglang/kernels/ops/speculative/spec_tree.py`
(`sgl_build_tree_kernel_efficient_triton`, `verify_tree_greedy_kernel_triton`) and
`sglang/kernels/ops/speculative/eagle.py` (`fill_bonus_tokens`,
`fill_accept_out_cache_loc`). One loop iteration here is one Triton program there.
"""

from __future__ import annotations

import torch

FULL_MASK = 0  # TreeMaskMode.FULL_MASK; QLEN_ONLY (1) is what SGLang uses on CPU


def fill_bonus_tokens_cpu(accept_tokens: torch.Tensor, accept_lens: torch.Tensor,
                          bonus_tokens: torch.Tensor, accept_stride: int) -> None:
    """bonus[b] = the last accepted token of request b (accept_lens counts the bonus)."""
    flat = accept_tokens.reshape(-1)
    for b, length in enumerate(accept_lens.tolist()):
        bonus_tokens[b] = flat[accept_stride * b + int(length) - 1]


def fill_accept_out_cache_loc_cpu(accept_index: torch.Tensor, out_cache_loc: torch.Tensor,
                                  accept_out_cache_loc: torch.Tensor) -> None:
    """The cache slots of the accepted tokens, packed: entry p of accept_index (>= 0)
    goes to position #(accepted entries before p)."""
    dst = 0
    for src in accept_index.reshape(-1).tolist():
        if src > -1:
            accept_out_cache_loc[dst] = out_cache_loc[int(src)]
            dst += 1


def _find(selected: list[int], token: int, limit: int) -> int:
    """Index of `token` among the first `limit` selected entries, or -1."""
    for position in range(limit):
        if selected[position] == token:
            return position
    return -1


def build_tree_kernel_efficient_cpu(
    parent_list: torch.Tensor, selected_index: torch.Tensor, verified_seq_len: torch.Tensor,
    tree_mask: torch.Tensor, positions: torch.Tensor, retrieve_index: torch.Tensor,
    retrieve_next_token: torch.Tensor, retrieve_next_sibling: torch.Tensor, topk: int,
    depth: int, draft_token_num: int, tree_mask_mode: int,
) -> None:
    """The draft tree of each request from the draft's top-k parents and selections:
    positions, the retrieve links (first child, next sibling) and the attention mask.
    retrieve_next_* must come in filled with -1 (the caller's contract)."""
    n = draft_token_num
    seq_lens = [int(x) for x in verified_seq_len.tolist()]
    prefix_sums = [sum(seq_lens[:b]) for b in range(len(seq_lens))]
    mask = tree_mask.view(-1)
    flat_positions = positions.view(-1)
    flat_index, flat_next = retrieve_index.view(-1), retrieve_next_token.view(-1)
    flat_sibling = retrieve_next_sibling.view(-1)
    parents_2d = parent_list.reshape(len(seq_lens), -1)  # one row of parents per request
    for b, seq_len in enumerate(seq_lens):
        selected = [int(x) for x in selected_index[b].tolist()]
        parents = [int(x) for x in parents_2d[b].tolist()]
        flat_positions[b * n] = seq_len
        for i in range(n - 1, 0, -1):
            flat_index[b * n + i] = b * n + i
            parent_tb = selected[i - 1] // topk
            if parent_tb == 0:
                parent_position = 0
            else:
                found = _find(selected, parents[parent_tb], n - 1)
                if found < 0:
                    continue
                parent_position = found + 1
            address = b * n + parent_position
            previous = int(flat_next[address])
            flat_next[address] = i
            if previous != -1:
                flat_sibling[b * n + i] = previous
        flat_index[b * n] = b * n
        seq_tree = n * n * b + prefix_sums[b] * n
        for x in range(n):
            if tree_mask_mode == FULL_MASK:
                row = seq_tree + (seq_len + n) * x + seq_len + 1
            else:
                row = n * n * b + n * x + 1
            mask[row - 1] = 1
            mask[row:row + n - 1] = 0
            if x == 0:
                continue
            current, position = x - 1, 0
            for _ in range(depth):
                position += 1
                mask[row + current] = 1
                parent_tb = selected[current] // topk
                if parent_tb == 0:
                    break
                found = _find(selected, parents[parent_tb], n - 1)
                if found < 0:
                    break
                current = found
            flat_positions[b * n + x] = position + seq_len


def verify_tree_greedy_cpu(*, predicts: torch.Tensor, accept_index: torch.Tensor,
                           accept_token_num: torch.Tensor, candidates: torch.Tensor,
                           retrive_index: torch.Tensor, retrive_next_token: torch.Tensor,
                           retrive_next_sibling: torch.Tensor,
                           target_predict: torch.Tensor) -> None:
    """Greedy verification: from the root, follow the child whose draft token equals the
    target's prediction at the last accepted node; record the accepted path, the accepted
    count (bonus not included) and the target's tokens at the accepted nodes."""
    batch = candidates.shape[0]
    steps = accept_index.shape[1]
    flat_target, flat_predicts = target_predict.reshape(-1), predicts.view(-1)
    for b in range(batch):
        last = int(retrive_index[b, 0])
        accept_index[b, 0] = last
        accepted, current = 0, 0
        for _ in range(1, steps):
            current = int(retrive_next_token[b, current])
            target = int(flat_target[last])
            matched = False
            while current != -1:
                if int(candidates[b, current]) == target:
                    flat_predicts[last] = target
                    accepted += 1
                    last = int(retrive_index[b, current])
                    accept_index[b, accepted] = last
                    matched = True
                    break
                current = int(retrive_next_sibling[b, current])
            if not matched:
                break
        accept_token_num[b] = accepted
        flat_predicts[last] = flat_target[last]
