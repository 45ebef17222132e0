"""`torch.ops.sgl_kernel.decode_attention_cpu` / `extend_attention_cpu`, as the intel_amx
attention backend (`sglang/srt/layers/attention/intel_amx_backend.py`) calls them.

Contract: the backend's calls and comments, and the Triton backend's decode and extend
attention (`sglang/srt/layers/attention/triton_ops/`) whose results they replace:
softmax(q k^T * sm_scale) v over the request's cached tokens (`req_to_token`), grouped
heads (q head h reads kv head h // (q heads / kv heads)), an optional soft cap
(cap * tanh(x / cap)), causal within the new tokens or, in a verify step with a token
tree, the tree's ancestor mask (the committed prefix stays visible). Decode writes the
new token's K/V into the cache itself ("decode writes KV in-kernel"); `attn_logits` is
the CUDA kernel's scratch space, unused here.

Sliding windows (`sliding_window` > 0: the backend passes the layer's
`sliding_window_size + 1`, i.e. the HF window W that includes the token itself), in
FlashAttention-3's convention `window_size = (W - 1, 0)` for a causal layer and
`(W - 1, W - 1)` for a bidirectional one: a query at position p sees a key at position
k when p - k <= W - 1 and, bidirectional, k - p <= W - 1 (causal: k <= p). Attention
sinks and cross-attention are not on this path; they are refused rather than guessed.

What the kernel received is recorded when `HARNESS_ATTENTION_RECORD` names a file: one
JSON line per distinct (model, layer, causal, window) it was called with (`_record`), so
a run can compare the attention each draft layer actually got with the audit's table.
"""

from __future__ import annotations

import json
import os
import sys

import torch

RECORD_ENV = "HARNESS_ATTENTION_RECORD"
_seen: set[tuple[int, str, bool, int]] = set()


def _refuse(sinks: torch.Tensor | None, is_cross: bool) -> None:
    if sinks is not None or is_cross:
        raise NotImplementedError(
            "sgl_kernel stand-in: sinks and cross-attention are not implemented "
            f"(sinks {sinks is not None}, cross {is_cross})")


def _window_mask(visible: torch.Tensor, q_positions: torch.Tensor, k_positions: torch.Tensor,
                 window: int, causal: bool) -> torch.Tensor:
    """`visible` narrowed to the window (FA3: left edge W - 1; right edge 0 when causal,
    W - 1 when bidirectional). window <= 0: no window."""
    if window <= 0:
        return visible
    distance = q_positions.view(-1, 1) - k_positions.view(1, -1)  # p - k
    inside = distance <= window - 1
    inside &= (distance >= 0) if causal else (distance >= -(window - 1))
    return visible & inside


def _record(kernel: str, causal: bool, window: int) -> None:
    """Append what this call received, with the layer and the model found in the caller's
    frames: the attention backend's `layer` argument, and the model files on the stack
    (`dflash` when the DFlash draft's code is among them)."""
    path = os.environ.get(RECORD_ENV)
    if not path:
        return
    frame = sys._getframe(1)
    while frame is not None and not hasattr(frame.f_locals.get("layer"), "layer_id"):
        frame = frame.f_back
    if frame is None:
        return
    layer = frame.f_locals["layer"]
    key = (id(layer), kernel, causal, window)
    if key in _seen:
        return
    _seen.add(key)
    models = []
    while frame is not None:
        name = frame.f_code.co_filename.replace(os.sep, "/")
        if "/sglang/srt/models/" in name:
            models.append(name.rsplit("/", 1)[-1].removesuffix(".py"))
        frame = frame.f_back
    model = "dflash" if "dflash" in models else (models[-1] if models else "unknown")
    line = {"pid": os.getpid(), "model": model, "layer": int(layer.layer_id),
            "kernel": kernel, "causal": bool(causal), "window": int(window) or None}
    with open(path, "a", encoding="utf-8") as out:
        out.write(json.dumps(line, sort_keys=True) + "\n")


def _attend(q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, visible: torch.Tensor,
            sm_scale: float, logit_cap: float) -> torch.Tensor:
    """q [T, H, D], keys/values [S, Hkv, D], visible [T, S] -> [T, H, Dv], in float32."""
    group = q.shape[1] // keys.shape[1]
    keys = keys.float().repeat_interleave(group, dim=1)
    values = values.float().repeat_interleave(group, dim=1)
    scores = torch.einsum("thd,shd->hts", q.float(), keys) * sm_scale
    if logit_cap > 0:
        scores = logit_cap * torch.tanh(scores / logit_cap)
    scores = scores.masked_fill(~visible.unsqueeze(0), float("-inf"))
    return torch.einsum("hts,shd->thd", torch.softmax(scores, dim=-1), values)


def decode_attention_cpu(
    query: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, k_scale: float,
    v_scale: float, output: torch.Tensor, key: torch.Tensor | None,
    value: torch.Tensor | None, loc: torch.Tensor, attn_logits: torch.Tensor,
    req_to_token: torch.Tensor, req_pool_indices: torch.Tensor, seq_lens: torch.Tensor,
    sm_scale: float, logit_cap: float, is_cross_attention: bool, sliding_window: int,
    encoder_lens: torch.Tensor | None, sinks: torch.Tensor | None,
) -> None:
    _refuse(sinks, is_cross_attention)
    _record("decode", True, sliding_window)
    if key is not None and value is not None:
        k_cache[loc] = key.view(-1, *k_cache.shape[1:]).to(k_cache.dtype)
        v_cache[loc] = value.view(-1, *v_cache.shape[1:]).to(v_cache.dtype)
    for b, seq_len in enumerate(int(s) for s in seq_lens.tolist()):
        slots = req_to_token[int(req_pool_indices[b]), :seq_len].long()
        keys, values = k_cache[slots].float() * k_scale, v_cache[slots].float() * v_scale
        visible = _window_mask(torch.ones((1, seq_len), dtype=torch.bool),
                               torch.tensor([seq_len - 1]), torch.arange(seq_len),
                               sliding_window, True)
        output[b:b + 1] = _attend(query[b:b + 1], keys, values, visible, sm_scale,
                                  logit_cap).to(output.dtype)


def extend_attention_cpu(
    q_extend: torch.Tensor, k_extend: torch.Tensor | None, v_extend: torch.Tensor | None,
    o_extend: torch.Tensor, k_buffer: torch.Tensor, v_buffer: torch.Tensor, k_scale: float,
    v_scale: float, req_to_token: torch.Tensor, req_pool_indices: torch.Tensor,
    seq_lens: torch.Tensor, extend_seq_lens: torch.Tensor, extend_start_loc: torch.Tensor,
    max_len_extend: int, sm_scale: float, logit_cap: float, is_cross_attention: bool,
    sliding_window: int, encoder_lens: torch.Tensor | None, sinks: torch.Tensor | None,
    tree_mask: torch.Tensor | None, is_causal: bool,
) -> None:
    """Prefill or verify: request b's extend_seq_lens[b] new tokens (from
    extend_start_loc[b]) attend to its first seq_lens[b] - extend tokens and to each
    other. With `tree_mask` (flat, per request an extend x extend block, QLEN_ONLY
    layout): new token i sees new token j where the mask says so."""
    _refuse(sinks, is_cross_attention)
    _record("extend", is_causal, sliding_window)
    mask_offset = 0
    for b, (seq_len, length, start) in enumerate(zip(
            seq_lens.tolist(), extend_seq_lens.tolist(), extend_start_loc.tolist(),
            strict=True)):
        seq_len, length, start = int(seq_len), int(length), int(start)
        prefix = seq_len - length
        slots = req_to_token[int(req_pool_indices[b]), :seq_len].long()
        keys, values = k_buffer[slots].float(), v_buffer[slots].float()
        if k_extend is not None and v_extend is not None:  # the new tokens as computed
            keys[prefix:] = k_extend[start:start + length].view(length, *keys.shape[1:])
            values[prefix:] = v_extend[start:start + length].view(length, *values.shape[1:])
        visible = torch.ones((length, seq_len), dtype=torch.bool)
        if tree_mask is not None:
            block = tree_mask.reshape(-1)[mask_offset:mask_offset + length * length]
            visible[:, prefix:] = block.view(length, length).to(torch.bool)
            mask_offset += length * length
        elif is_causal:
            visible[:, prefix:] = torch.tril(torch.ones((length, length), dtype=torch.bool))
        visible = _window_mask(visible, torch.arange(prefix, seq_len), torch.arange(seq_len),
                               sliding_window, is_causal or tree_mask is not None)
        o_extend[start:start + length] = _attend(
            q_extend[start:start + length], keys * k_scale, values * v_scale, visible,
            sm_scale, logit_cap).to(o_extend.dtype)


def register_attention_ops() -> None:
    """Make them `torch.ops.sgl_kernel.*`, where the backend looks them up."""
    if hasattr(torch.ops.sgl_kernel, "decode_attention_cpu"):
        return
    torch.library.custom_op("sgl_kernel::decode_attention_cpu",
                            mutates_args=("k_cache", "v_cache", "output", "attn_logits"),
                            device_types="cpu")(decode_attention_cpu)
    torch.library.custom_op("sgl_kernel::extend_attention_cpu", mutates_args=("o_extend",),
                            device_types="cpu")(extend_attention_cpu)
