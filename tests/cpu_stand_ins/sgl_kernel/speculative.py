"""`sgl_kernel.speculative.reconstruct_indices_from_tree_mask`, NGRAM's verify metadata.

Contract: the docstring of `sglang/kernels/ops/speculative/reconstruct_tree.py`, the
Triton kernel that reproduces this op on XPU ("identical numerical contract").
"""

from __future__ import annotations

import torch


def reconstruct_indices_from_tree_mask(tree_mask: torch.Tensor, verified_seq_len: torch.Tensor,
                                       positions: torch.Tensor, retrive_index: torch.Tensor,
                                       retrive_next_token: torch.Tensor,
                                       retrive_next_sibling: torch.Tensor, batch_size: int,
                                       draft_token_num: int) -> None:
    n = draft_token_num
    masks = tree_mask.reshape(batch_size, n, n).to(torch.bool)
    for b in range(batch_size):
        ancestors = masks[b] & torch.tril(torch.ones(n, n, dtype=torch.bool), diagonal=-1)
        depth = ancestors.sum(dim=1)
        parent = [max((j for j in range(i) if ancestors[i, j]), default=-1) for i in range(n)]
        seq_len = int(verified_seq_len[b])
        for tid in range(n):
            out = b * n + tid
            positions.view(-1)[out] = int(depth[tid]) + seq_len
            retrive_index.view(-1)[out] = out
            child = next((k for k in range(tid + 1, n) if ancestors[k, tid]), -1)
            retrive_next_token.view(-1)[out] = child
            sibling = -1
            if parent[tid] >= 0:
                sibling = next((k for k in range(tid + 1, n) if parent[k] == parent[tid]), -1)
            retrive_next_sibling.view(-1)[out] = sibling
