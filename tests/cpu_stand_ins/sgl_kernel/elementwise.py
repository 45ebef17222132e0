"""`torch.ops.sgl_kernel.fused_sigmoid_mul_cpu`, the attention output gate on CPU.

Contract: SGLang's `sglang.kernels.ops.elementwise.elementwise.fused_sigmoid_mul` (the
Triton kernel it replaces on CUDA), "Equivalent to: attn_output * sigmoid(gate)", and its
CPU callers (`models/muse_glimmer.py`, `models/qwen3_5.py`), which pass the attention
output and the gate of the same shape and use the first argument, written in place.
"""

from __future__ import annotations

import torch


def fused_sigmoid_mul_cpu(x: torch.Tensor, gate: torch.Tensor) -> None:
    x.copy_((x.float() * torch.sigmoid(gate.float()).view(x.shape)).to(x.dtype))


def register_elementwise_ops() -> None:
    """Make it `torch.ops.sgl_kernel.fused_sigmoid_mul_cpu`, looked up at model import."""
    if hasattr(torch.ops.sgl_kernel, "fused_sigmoid_mul_cpu"):
        return
    torch.library.custom_op("sgl_kernel::fused_sigmoid_mul_cpu", mutates_args=("x",),
                            device_types="cpu")(fused_sigmoid_mul_cpu)
