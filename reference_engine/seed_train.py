"""Build a seed miniature: its target, then a DFlash draft distilled from it.

Run in an environment with torch, transformers (with Gemma 4) and dflash (the
reference extra), never in the harness process:
`python -m reference_engine.seed_train --pair gemma4 --out DIR`.
Deterministic for a recipe: fixed seeds, one CPU thread, deterministic algorithms.

The stages are the reference build's own (`train.py`: `fit_target`, `distill_sequences`,
`fit_draft`), run on the pair's target (`Gemma4Target`, `MuseGlimmerTarget`: each a
`train.Teacher`): the same tokenizer and corpus, a target trained on the corpus, the
target's own greedy continuations as the draft's data, and a draft trained under the
attention SGLang gives its layers (one mask per layer), with exactly the inputs SGLang's
DFLASH worker gives it:

- context features: the target's layer outputs at `target_layer_ids` (gemma-4 captures the
  output of layer k; a Muse Glimmer target the input of layer k + 1 for these drafts: the
  same tensor);
- the block's input: the target's own embedding module applied to `[token, mask, ...]`
  (gemma-4's scales by sqrt(hidden), Muse Glimmer's does not);
- logits through the target's head (gemma-4: tied embedding, softcap 30; Muse Glimmer:
  its head, output multiplier, softcap 20).

The target is rounded to bfloat16 (the real checkpoints' dtype, and what the suites
serve) before its continuations are generated, so the draft learns the served target.
Files are written in a fixed form (sorted keys; safetensors with sorted tensors), so a
rebuild on the same machine is bit-identical.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import torch
from dflash.model import DFlashDraftModel
from safetensors.torch import save_file
from torch.nn import functional as F
from transformers import PreTrainedTokenizerFast, Qwen3Config

from harness.suite.attention import resolve_layers
from reference_engine.muse_glimmer_model import MuseGlimmerLM, vendor_name
from reference_engine.recipe import DEFAULT_RECIPE as TOKENIZER_RECIPE
from reference_engine.recipe import SeedRecipe, recipe_for, with_overrides
from reference_engine.seed_configs import (
    DRAFT_CONFIGS,
    GEMMA4_SPECIAL_TOKENS,
    TARGET_CONFIGS,
    TokenIds,
    gemma4_processor,
    muse_glimmer_text,
)
from reference_engine.train import (
    build_arguments,
    build_tokenizer,
    distill_sequences,
    fit_draft,
    fit_target,
)

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")


def gemma4_tokenizer(tokenizer, out: Path):
    """The reference tokenizer plus gemma-4's multimodal markers, which its processor reads
    as tokenizer attributes (`image_token`, `boi_token`, ...): ids 1024 onwards."""

    markers = dict(GEMMA4_SPECIAL_TOKENS)
    backend = tokenizer.backend_tokenizer
    backend.add_special_tokens(list(markers.values()))
    extended = PreTrainedTokenizerFast(
        tokenizer_object=backend, eos_token=tokenizer.eos_token,
        pad_token=tokenizer.pad_token, mask_token=tokenizer.mask_token,
        extra_special_tokens=markers)
    extended.chat_template = tokenizer.chat_template
    extended.save_pretrained(out, save_jinja_files=False)
    return extended


def log(message: str) -> None:
    print(f"[seed build] {message}", file=sys.stderr, flush=True)


def write_json(path: Path, data: dict[str, Any]) -> None:
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


def write_weights(path: Path, tensors: dict[str, torch.Tensor]) -> None:
    """bfloat16 safetensors, tensors in sorted order: the same bytes for the same values."""

    save_file({name: tensors[name].detach().to(torch.bfloat16).contiguous()
               for name in sorted(tensors)}, str(path), metadata={"format": "pt"})
    path.chmod(0o644)  # save_file makes it private; the shipped files are not


def _to_bf16(model: torch.nn.Module) -> None:
    """Round every parameter to bfloat16 and back: the target the suites serve."""
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.copy_(parameter.to(torch.bfloat16).to(parameter.dtype))


# ---------------------------------------------------------------- targets


def _without_dtype(config: dict[str, Any]) -> dict[str, Any]:
    return {key: _without_dtype(value) if isinstance(value, dict) else value
            for key, value in config.items() if key != "dtype"}


class Gemma4Target:
    """transformers' Gemma4ForConditionalGeneration, text only."""

    def __init__(self, config: dict[str, Any]) -> None:
        from transformers import Gemma4Config, Gemma4ForConditionalGeneration

        self.config = config
        # trained in float32: the config's dtype (bfloat16) is the checkpoint's
        hf_config = Gemma4Config.from_dict(_without_dtype(config))
        self.model = Gemma4ForConditionalGeneration(hf_config).float()

    def loss(self, batch: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids=batch, labels=batch).loss

    def features(self, ids: torch.Tensor, layer_ids: list[int]) -> torch.Tensor:
        hidden = self.model.model.language_model(input_ids=ids,
                                                 output_hidden_states=True).hidden_states
        return torch.cat([hidden[i + 1] for i in layer_ids], dim=-1)

    def embed(self, ids: torch.Tensor) -> torch.Tensor:
        return self.model.get_input_embeddings()(ids)  # scaled by sqrt(hidden)

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        cap = self.config["text_config"]["final_logit_softcapping"]
        logits = F.linear(hidden, self.model.get_input_embeddings().weight)
        return cap * torch.tanh(logits / cap)

    def greedy(self, batch: torch.Tensor, new_tokens: int, pad: int) -> torch.Tensor:
        return self.model.generate(input_ids=batch, attention_mask=torch.ones_like(batch),
                                   do_sample=False, max_new_tokens=new_tokens,
                                   pad_token_id=pad, eos_token_id=None)

    def tensors(self) -> dict[str, torch.Tensor]:
        # tied: the head is the embedding, which the checkpoint stores once
        return {name: value for name, value in self.model.state_dict().items()
                if name != "lm_head.weight"}


class MuseGlimmerTarget:
    """The project's torch Muse Glimmer decoder (`muse_glimmer_model`)."""

    def __init__(self, config: dict[str, Any], text: dict[str, Any]) -> None:

        self.config = config
        self.model = MuseGlimmerLM(text)

    def loss(self, batch: torch.Tensor) -> torch.Tensor:
        logits, _ = self.model(batch)
        return F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]),
                               batch[:, 1:].reshape(-1))

    def features(self, ids: torch.Tensor, layer_ids: list[int]) -> torch.Tensor:
        _, outputs = self.model(ids)
        return torch.cat([outputs[i] for i in layer_ids], dim=-1)

    def embed(self, ids: torch.Tensor) -> torch.Tensor:
        return self.model.get_input_embeddings()(ids)  # raw: the norm is inside the model

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.model.logits(hidden)

    def greedy(self, batch: torch.Tensor, new_tokens: int, pad: int) -> torch.Tensor:
        return self.model.greedy(batch, new_tokens)

    def tensors(self) -> dict[str, torch.Tensor]:

        return {vendor_name(name): value for name, value in self.model.state_dict().items()}


# ---------------------------------------------------------------- drafts


def draft_layers(pair: str, draft_config: dict[str, Any]) -> list[tuple[bool, int | None]]:
    """(causal, window) per draft layer as SGLang 0.5.23 resolves this draft: PR #34524's
    contract for an undeclared `is_causal`; `MuseGlimmerAssistantConfig` states
    `is_causal = False` as a class attribute, so every assistant layer is bidirectional."""
    config = {**draft_config, "is_causal": False} if pair == "muse_glimmer" else draft_config
    return [(entry.causal, entry.window) for entry in resolve_layers(config, "fixed")]


def _qwen3_config(draft_config: dict[str, Any], target_layers: int):
    """The dflash reference model's config for the same shapes (it builds Qwen3 layers)."""

    keys = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
            "num_attention_heads", "num_key_value_heads", "head_dim", "rms_norm_eps",
            "max_position_embeddings", "layer_types", "sliding_window")
    values = {key: draft_config[key] for key in keys if key in draft_config}
    values.setdefault("vocab_size", 8)  # the assistant has no head: no vocabulary of its own
    theta = draft_config.get("rope_theta") or draft_config["rope_parameters"]["rope_theta"]
    config = Qwen3Config(**values, use_sliding_window=True,
                         max_window_layers=len(values["layer_types"]),
                         rope_parameters={"rope_theta": theta, "rope_type": "default"},
                         architectures=["DFlashDraftModel"])
    config.num_target_layers = target_layers
    config.block_size = draft_config["block_size"]
    config.dflash_config = {"mask_token_id": _draft_field(draft_config, "mask_token_id"),
                            "target_layer_ids": _draft_field(draft_config, "target_layer_ids")}
    return config


def _draft_field(draft_config: dict[str, Any], name: str) -> Any:
    """A DFlash field from `dflash_config`, else the top level (as SGLang reads it)."""
    return draft_config.get("dflash_config", {}).get(name, draft_config.get(name))


def train_draft(recipe: SeedRecipe, target, draft_config: dict[str, Any],
                sequences: list[tuple[list[int], int]], pad: int, mask_id: int):
    torch.manual_seed(recipe.seed + 30)
    draft = DFlashDraftModel(_qwen3_config(draft_config, len(recipe.target_layer_types)))
    fit_draft(recipe, target, draft, sequences, layers=draft_layers(recipe.pair, draft_config),
              layer_ids=list(recipe.target_layer_ids), block=recipe.train_block, pad=pad,
              mask_id=mask_id, say=log)
    return draft


# The names the Muse Glimmer assistant's native export gives its context projection
# (SGLang's DFlashDraftModel.load_weights aliases them).
MUSE_DRAFT_NAMES = {"fc.weight": "encoder.fc.weight",
                    "hidden_norm.weight": "encoder.output_norm_enc.weight"}


def draft_tensors(pair: str, draft) -> dict[str, torch.Tensor]:
    tensors = {name: value for name, value in draft.state_dict().items()
               if not name.endswith("inv_freq")}
    if pair == "muse_glimmer":
        tensors = {MUSE_DRAFT_NAMES.get(name, name): value for name, value in tensors.items()}
    return tensors


# ---------------------------------------------------------------- the build


def build(out: Path, recipe: SeedRecipe) -> None:
    """Write `target/`, `draft/` and `recipe.json` under `out`."""
    # One thread: on a shared machine two OpenMP threads wait on each other at every
    # parallel region (the build took many times longer); one is as deterministic.
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    started = time.perf_counter()
    target_dir, draft_dir = out / "target", out / "draft"
    target_dir.mkdir(parents=True, exist_ok=True)
    draft_dir.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tokenizer(TOKENIZER_RECIPE, target_dir)
    special: tuple[tuple[str, int], ...] = ()
    if recipe.pair == "gemma4":
        tokenizer = gemma4_tokenizer(tokenizer, target_dir)
        special = tuple((name, tokenizer.convert_tokens_to_ids(token))
                        for name, token in GEMMA4_SPECIAL_TOKENS)
        write_json(target_dir / "processor_config.json", gemma4_processor(recipe))
    ids = TokenIds(vocab_size=len(tokenizer), eos=tokenizer.eos_token_id,
                   pad=tokenizer.pad_token_id, mask=tokenizer.mask_token_id, special=special)
    target_config = TARGET_CONFIGS[recipe.pair](recipe, ids)
    draft_config = DRAFT_CONFIGS[recipe.pair](recipe, ids)
    torch.manual_seed(recipe.seed)
    if recipe.pair == "muse_glimmer":
        target = MuseGlimmerTarget(target_config, muse_glimmer_text(recipe, ids))
    else:
        target = Gemma4Target(target_config)
    fit_target(recipe, target, tokenizer, log)
    _to_bf16(target.model)
    log(f"target trained in {time.perf_counter() - started:.0f} s")
    write_json(target_dir / "config.json", target_config)
    write_weights(target_dir / "model.safetensors", target.tensors())
    sequences = distill_sequences(recipe, target, tokenizer, log)
    draft = train_draft(recipe, target, draft_config, sequences, ids.pad, ids.mask)
    write_json(draft_dir / "config.json", draft_config)
    write_weights(draft_dir / "model.safetensors", draft_tensors(recipe.pair, draft))
    for name in TOKENIZER_FILES:
        (draft_dir / name).write_bytes((target_dir / name).read_bytes())
    # No timings here: the folder must be bit-identical across builds of one recipe.
    record = {"recipe": recipe.to_json(), "digest": recipe.digest(), "torch": torch.__version__}
    write_json(out / "recipe.json", record)
    log(f"built {recipe.pair} in {time.perf_counter() - started:.0f} s -> {out}")


def main(argv: list[str] | None = None) -> int:
    args, overrides = build_arguments(argv, __doc__.splitlines()[0], pair=True)
    build(args.out, with_overrides(recipe_for(args.pair), overrides))
    return 0


if __name__ == "__main__":
    sys.exit(main())
