"""A test-only stand-in for the `sgl_kernel` CPU ops SGLang 0.5.23 calls on this path.

No CPU build of SGLang's kernel library is published and it cannot be installed here, so
this package takes its place in the engine environment of the CPU suites (it is put on
the server's `PYTHONPATH` and identified in the run record by its sha256). Each op is
written from the contract SGLang's own source states for it: the Triton (or CUDA) kernel
it replaces on other devices, named beside each op. Everything above the kernels, the
scheduler, the speculative workers, the attention backend, is SGLang's unmodified code.
The ops are plain loops over tensors: correct and slow, sized for the tiny models.
"""

from __future__ import annotations

from sgl_kernel.attention import register_attention_ops
from sgl_kernel.cache import (
    assign_draft_cache_locs_contiguous_cpu,
    assign_extend_cache_locs_cpu,
    assign_req_to_token_pool_cpu,
    build_draft_decode_metadata_cpu,
    copy_all_layer_kv_cache_cpu,
)
from sgl_kernel.elementwise import register_elementwise_ops
from sgl_kernel.tree import (
    build_tree_kernel_efficient_cpu,
    fill_accept_out_cache_loc_cpu,
    fill_bonus_tokens_cpu,
    verify_tree_greedy_cpu,
)

__version__ = "0.0.0+harness-cpu-stand-in"
STAND_IN = True  # for a reader who finds this package: it is not SGLang's library

register_attention_ops()
register_elementwise_ops()

__all__ = [
    "assign_draft_cache_locs_contiguous_cpu", "assign_extend_cache_locs_cpu",
    "assign_req_to_token_pool_cpu", "build_draft_decode_metadata_cpu",
    "build_tree_kernel_efficient_cpu", "copy_all_layer_kv_cache_cpu",
    "fill_accept_out_cache_loc_cpu", "fill_bonus_tokens_cpu", "verify_tree_greedy_cpu",
]
