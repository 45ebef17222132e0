"""Muse Glimmer's text decoder in plain torch, to train the miniature target.

The build's environment (transformers 5.15, the reference extra) has no Muse Glimmer
model, so the build trains this one, written from what SGLang 0.5.23's
`models/muse_glimmer.py` computes (the serving code is the oracle: the shipped weights must
mean to SGLang what they meant in training; a test compares its logits with transformers
5.19's `MuseGlimmerForConditionalGeneration`, SGLang's pin, on the shipped target). Per
layer:

    h = x + post_attn_norm(attn(input_layernorm(x)))
    y = h + post_ffn_norm(mlp(post_attention_layernorm(h)))

The token embedding is RMS-normalised without a weight; attention normalises q and k per
head without a weight, applies RoPE (NeoX pairs for the vendor export, which SGLang reads
with `rope_is_neox_style` true; GPT-J pairs otherwise) on the layers `no_rope_layers`
marks, scales by `qk_scale_factor / head_dim`, keeps a sliding window of `sliding_window`
tokens (the query included) on sliding layers, and gates its output with
`sigmoid(output_gate_proj(x))`; the MLP is SiLU-gated; the final norm has an absolute
weight, the four per-layer norms store an offset from 1 (SGLang adds 1.0 at load), so
their parameters here are those offsets; logits are `lm_head(y)` times
`output_multiplier`, softcapped at `output_soft_cap_temp`.

The parameter names are SGLang's (`model.embed_tokens`, `model.layers.N.{input_layernorm,
self_attn.{q,k,v,o,output_gate}_proj, post_attn_norm, post_attention_layernorm,
mlp.{gate,up,down}_proj, post_ffn_norm}`, `model.norm`, `lm_head`); `vendor_name` gives the
name the vendor's multimodal export stores each under, which SGLang's
`MuseGlimmerForConditionalGeneration` maps back (`_VENDOR_TO_SGLANG`).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

# SGLang's name -> the vendor export's: (prefix), then at most one substring rename.
_VENDOR_PREFIX = ("model.", "model.language_model.")
_VENDOR_RENAMES = (
    ("post_attn_norm", "post_attention_layernorm"),
    ("post_attention_layernorm", "pre_feedforward_layernorm"),
    ("post_ffn_norm", "post_feedforward_layernorm"),
    ("self_attn.output_gate_proj", "self_attn.gate_proj"),
)


def vendor_name(name: str) -> str:
    """The vendor export's name for a parameter named as SGLang names it."""
    ours, theirs = _VENDOR_PREFIX
    if name.startswith(ours):
        name = theirs + name[len(ours):]
    for sglang_part, vendor_part in _VENDOR_RENAMES:
        if sglang_part in name:
            return name.replace(sglang_part, vendor_part)
    return name


def rms(x: torch.Tensor, eps: float) -> torch.Tensor:
    x32 = x.float()
    return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)


class Norm(nn.Module):
    """RMSNorm whose weight is an offset from 1 (`offset`) or the scale itself."""

    def __init__(self, size: int, eps: float, offset: bool) -> None:
        super().__init__()
        self.eps, self.offset = eps, offset
        self.weight = nn.Parameter(torch.zeros(size) if offset else torch.ones(size))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scale = 1.0 + self.weight if self.offset else self.weight
        return rms(x, self.eps) * scale


def rope(x: torch.Tensor, positions: torch.Tensor, base: float, neox: bool) -> torch.Tensor:
    """Rotate pairs by position x base^(-2i/d), x: [B, T, H, D]. NeoX pairs element i
    with i + D/2; GPT-J pairs adjacent elements (2i, 2i + 1)."""
    dim = x.shape[-1]
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
    angles = positions.float()[..., None] * inv_freq  # [B, T, D/2]
    cos, sin = angles.cos()[:, :, None, :], angles.sin()[:, :, None, :]
    if neox:
        first, second = x[..., :dim // 2].float(), x[..., dim // 2:].float()
        rotated = torch.cat((first * cos - second * sin, second * cos + first * sin), dim=-1)
        return rotated.to(x.dtype)
    even, odd = x[..., 0::2].float(), x[..., 1::2].float()
    rotated = torch.stack((even * cos - odd * sin, odd * cos + even * sin), dim=-1)
    return rotated.flatten(-2).to(x.dtype)


class Attention(nn.Module):
    def __init__(self, config: dict[str, Any], layer: int) -> None:
        super().__init__()
        hidden, heads = config["hidden_size"], config["num_attention_heads"]
        self.heads, self.kv_heads = heads, config["num_key_value_heads"]
        self.head_dim = config["head_dim"]
        self.eps = config["rms_norm_eps"]
        self.scale = config["qk_scale_factor"] / self.head_dim
        self.rope = config["no_rope_layers"][layer] == 1
        self.base, self.neox = config["rope_theta"], config["rope_is_neox_style"]
        sliding = config["layer_types"][layer] == "sliding_attention"
        self.window = config["sliding_window"] if sliding else None
        self.q_proj = nn.Linear(hidden, heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(hidden, self.kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(hidden, self.kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(heads * self.head_dim, hidden, bias=False)
        self.output_gate_proj = nn.Linear(hidden, heads * self.head_dim, bias=False)

    def forward(self, x: torch.Tensor, positions: torch.Tensor,
                cache: list[torch.Tensor] | None = None) -> torch.Tensor:
        """`cache`, when given, holds this layer's earlier keys and values ([k, v], or
        empty) and is extended with this call's: the query sees earlier positions too."""
        batch, length, _ = x.shape
        q = rms(self.q_proj(x).view(batch, length, self.heads, self.head_dim), self.eps)
        k = rms(self.k_proj(x).view(batch, length, self.kv_heads, self.head_dim), self.eps)
        v = self.v_proj(x).view(batch, length, self.kv_heads, self.head_dim)
        if self.rope:
            q = rope(q, positions, self.base, self.neox)
            k = rope(k, positions, self.base, self.neox)
        key_positions = positions
        if cache is not None:
            if cache:
                k, v = torch.cat([cache[0], k], dim=1), torch.cat([cache[1], v], dim=1)
                key_positions = torch.cat([cache[2], positions], dim=1)
            cache[:] = [k, v, key_positions]
        group = self.heads // self.kv_heads
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
        query_pos, key_pos = positions[:, :, None], key_positions[:, None, :]
        visible = key_pos <= query_pos
        if self.window is not None:
            visible &= query_pos - key_pos < self.window
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=visible[:, None],
                                             scale=self.scale)
        out = out.transpose(1, 2).reshape(batch, length, self.heads * self.head_dim)
        out = out * torch.sigmoid(self.output_gate_proj(x))
        return self.o_proj(out)


class MLP(nn.Module):
    def __init__(self, hidden: int, intermediate: int) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(hidden, intermediate, bias=False)
        self.up_proj = nn.Linear(hidden, intermediate, bias=False)
        self.down_proj = nn.Linear(intermediate, hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Layer(nn.Module):
    def __init__(self, config: dict[str, Any], layer: int) -> None:
        super().__init__()
        hidden, eps, post = config["hidden_size"], config["rms_norm_eps"], config["post_norm_eps"]
        self.input_layernorm = Norm(hidden, eps, offset=True)
        self.self_attn = Attention(config, layer)
        self.post_attn_norm = Norm(hidden, post, offset=True)
        self.post_attention_layernorm = Norm(hidden, eps, offset=True)
        self.mlp = MLP(hidden, config["intermediate_size"])
        self.post_ffn_norm = Norm(hidden, post, offset=True)

    def forward(self, x: torch.Tensor, positions: torch.Tensor,
                cache: list[torch.Tensor] | None = None) -> torch.Tensor:
        h = x + self.post_attn_norm(self.self_attn(self.input_layernorm(x), positions, cache))
        return h + self.post_ffn_norm(self.mlp(self.post_attention_layernorm(h)))


class Body(nn.Module):
    def __init__(self, config: dict[str, Any]) -> None:
        super().__init__()
        self.eps = config["rms_norm_eps"]
        self.normalize = config["normalize_tok_embeddings"]
        self.embed_tokens = nn.Embedding(config["vocab_size"], config["hidden_size"])
        self.layers = nn.ModuleList(Layer(config, i) for i in range(config["num_hidden_layers"]))
        self.norm = Norm(config["hidden_size"], self.eps, offset=False)


class MuseGlimmerLM(nn.Module):
    """The decoder with its head; `forward` returns (logits, every layer's output)."""

    def __init__(self, config: dict[str, Any]) -> None:
        super().__init__()
        self.config = config
        self.model = Body(config)
        self.lm_head = nn.Linear(config["hidden_size"], config["vocab_size"], bias=False)
        nn.init.normal_(self.model.embed_tokens.weight, std=0.02)
        for module in self.modules():
            if isinstance(module, nn.Linear):
                nn.init.normal_(module.weight, std=0.02)

    def get_input_embeddings(self) -> nn.Embedding:
        return self.model.embed_tokens

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        cap = self.config["output_soft_cap_temp"]
        logits = self.lm_head(hidden) * self.config["output_multiplier"]
        return cap * torch.tanh(logits / cap)

    def forward(self, input_ids: torch.Tensor, start: int = 0,
                caches: list[list[torch.Tensor]] | None = None,
                ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Logits and every layer's output for `input_ids` at positions `start`...;
        `caches` (one list per layer) carries keys and values between calls."""
        positions = torch.arange(start, start + input_ids.shape[1]).expand_as(input_ids)
        hidden = self.model.embed_tokens(input_ids)
        if self.model.normalize:
            hidden = rms(hidden, self.model.eps)
        outputs = []
        for index, layer in enumerate(self.model.layers):
            hidden = layer(hidden, positions, None if caches is None else caches[index])
            outputs.append(hidden)
        return self.logits(self.model.norm(hidden)), outputs

    @torch.inference_mode()
    def greedy(self, input_ids: torch.Tensor, new_tokens: int) -> torch.Tensor:
        """Greedy continuation of equal-length prompts, with a key/value cache."""
        caches: list[list[torch.Tensor]] = [[] for _ in self.model.layers]
        logits, _ = self(input_ids, 0, caches)
        ids = input_ids
        for _ in range(new_tokens):
            token = logits[:, -1].argmax(-1, keepdim=True)
            ids = torch.cat([ids, token], dim=1)
            logits, _ = self(token, ids.shape[1] - 1, caches)
        return ids
