"""Build the tiny reference checkpoints: tokenizer, Qwen3 target, distilled DFlash draft.

Run in the engine's environment (torch, transformers, dflash), never in the harness
process: `python -m reference_engine.train --out DIR`. Deterministic for a
recipe: fixed seeds, a single CPU thread count, no data-dependent randomness elsewhere.

Why distillation: a speculative decoder's accept length measures how well the draft
predicts the *target's own* greedy continuation, so the draft is trained on sequences the
target generated, not on the corpus. The draft sees exactly the inputs it gets in
`dflash_generate`: target hidden features of the positions before the anchor, and the
target's embedding of [anchor, mask, mask, ...]; labels are the target's next tokens.

The stages (`fit_target`, `distill_sequences`, `fit_draft`) take any target shaped as a
`Teacher`: this module's build runs them on the tiny Qwen3 target, `seed_train` on the
seed pairs' targets, so every pair is trained by the same loops.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

import torch
from dflash.model import DFlashDraftModel, extract_context_feature
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from torch.nn import functional as F
from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM

from harness.suite.attention import resolve_layers
from reference_engine import corpus
from reference_engine.recipe import DEFAULT_RECIPE, Recipe, SeedRecipe, with_overrides

EOS, PAD, MASK = "<|endoftext|>", "<|pad|>", "<|mask|>"


def log(message: str) -> None:
    print(f"[reference build] {message}", file=sys.stderr, flush=True)


class Teacher(Protocol):
    """A target as the build's stages use it (the tiny pair's `Qwen3Target`, the seed
    pairs' in `seed_train`): trained on the corpus, its greedy continuations distilled, its
    features, embedding and head the draft's inputs and outputs."""

    model: torch.nn.Module

    def loss(self, batch: torch.Tensor) -> torch.Tensor: ...

    def greedy(self, batch: torch.Tensor, new_tokens: int, pad: int) -> torch.Tensor: ...

    def features(self, ids: torch.Tensor, layer_ids: list[int]) -> torch.Tensor: ...

    def embed(self, ids: torch.Tensor) -> torch.Tensor: ...

    def logits(self, hidden: torch.Tensor) -> torch.Tensor: ...


class Qwen3Target:
    """The tiny target, transformers' Qwen3ForCausalLM: its own loss and generate, the
    hidden states DFlash's `extract_context_feature` reads, its embedding and tied head."""

    def __init__(self, model: Qwen3ForCausalLM) -> None:
        self.model = model

    def loss(self, batch: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids=batch, labels=batch).loss

    def greedy(self, batch: torch.Tensor, new_tokens: int, pad: int) -> torch.Tensor:
        return self.model.generate(input_ids=batch, attention_mask=torch.ones_like(batch),
                                   do_sample=False, max_new_tokens=new_tokens,
                                   pad_token_id=pad, eos_token_id=None)

    def features(self, ids: torch.Tensor, layer_ids: list[int]) -> torch.Tensor:
        hidden = self.model.model(input_ids=ids, output_hidden_states=True).hidden_states
        return extract_context_feature(hidden, layer_ids)

    def embed(self, ids: torch.Tensor) -> torch.Tensor:
        return F.embedding(ids, self.model.get_input_embeddings().weight.detach())

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.model.lm_head(hidden)


def build_tokenizer(recipe: Recipe, out: Path):  # -> PreTrainedTokenizerFast
    """Byte-level BPE: any text round-trips (unknown words become byte pieces).

    Digits are not split: frequent numbers become single tokens, which a tiny target copies
    from question to answer far more reliably than digit strings (it babbled digits).
    """

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=recipe.vocab_size,
        special_tokens=[EOS, PAD, MASK],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(corpus.documents(recipe.seed, 2000), trainer)
    wrapped = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, eos_token=EOS, pad_token=PAD, mask_token=MASK,
    )
    wrapped.chat_template = recipe.chat_template
    # In tokenizer_config.json (not chat_template.jinja): one file carries the template.
    wrapped.save_pretrained(out, save_jinja_files=False)
    return wrapped


def target_config(recipe: Recipe, tokenizer):  # -> Qwen3Config

    return Qwen3Config(
        vocab_size=len(tokenizer),
        hidden_size=recipe.hidden_size,
        intermediate_size=recipe.target_intermediate,
        num_hidden_layers=recipe.target_layers,
        num_attention_heads=recipe.heads,
        num_key_value_heads=recipe.kv_heads,
        head_dim=recipe.head_dim,
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
        architectures=["Qwen3ForCausalLM"],
    )


def fit_target(recipe: Recipe | SeedRecipe, target: Teacher, tokenizer,
               say: Callable[[str], None]) -> None:
    """Train the target on the corpus (every pair alike: chunks of `target_seq_len` drawn
    by a seeded generator, AdamW under warm-up and cosine); it ends in eval mode."""
    docs = list(corpus.documents(recipe.seed + 10, recipe.corpus_documents))
    stream = [token for ids in tokenizer(docs)["input_ids"] for token in ids]
    length = recipe.target_seq_len
    chunks = torch.tensor(stream[: len(stream) // length * length]).view(-1, length)
    say(f"target corpus: {len(stream)} tokens, {chunks.shape[0]} chunks of {length}")
    model = target.model
    optimizer = torch.optim.AdamW(model.parameters(), lr=recipe.target_lr, weight_decay=0.01)
    schedule = _warmup_cosine(optimizer, recipe.target_steps)
    generator = torch.Generator().manual_seed(recipe.seed + 11)
    model.train()
    for step in range(recipe.target_steps):
        rows = torch.randint(0, chunks.shape[0], (recipe.target_batch,), generator=generator)
        loss = target.loss(chunks[rows])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        if step % 50 == 0 or step == recipe.target_steps - 1:
            say(f"target step {step}: loss {loss.item():.3f}")
    model.eval()


def _warmup_cosine(optimizer, steps: int):
    warmup = max(1, steps // 20)

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * (step - warmup) / (steps - warmup)))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


@torch.inference_mode()
def distill_sequences(recipe: Recipe | SeedRecipe, target: Teacher, tokenizer,
                      say: Callable[[str], None]) -> list[tuple[list[int], int]]:
    """(prompt + the target's greedy continuation, prompt length) for each distill prompt.

    Prompts of equal token length are batched together so no padding enters the target:
    the continuations are then exactly what the engine's unpadded greedy decoding yields.
    """
    encoded = tokenizer(list(corpus.prompts(recipe.seed + 20, recipe.distill_prompts)))
    by_length: dict[int, list[list[int]]] = {}
    for ids in encoded["input_ids"]:
        by_length.setdefault(len(ids), []).append(ids)
    sequences = []
    for length, group in sorted(by_length.items()):
        for start in range(0, len(group), 64):
            batch = torch.tensor(group[start : start + 64])
            generated = target.greedy(batch, recipe.distill_new_tokens, tokenizer.pad_token_id)
            sequences.extend((row.tolist(), length) for row in generated)
    say(f"distilled {len(sequences)} greedy continuations; sample: "
        f"{tokenizer.decode(sequences[0][0][sequences[0][1]:])!r}")
    return sequences


def draft_config(recipe: Recipe, tokenizer):  # -> Qwen3Config

    config = Qwen3Config(
        vocab_size=len(tokenizer),
        hidden_size=recipe.hidden_size,
        intermediate_size=recipe.draft_intermediate,
        num_hidden_layers=len(recipe.draft_layer_types),
        num_attention_heads=recipe.heads,
        num_key_value_heads=recipe.kv_heads,
        head_dim=recipe.head_dim,
        max_position_embeddings=4096,
        layer_types=list(recipe.draft_layer_types),
        # Without use_sliding_window Qwen3Config drops sliding_window and the cache crashes.
        use_sliding_window=True,
        sliding_window=recipe.sliding_window,
        max_window_layers=len(recipe.draft_layer_types),
        tie_word_embeddings=False,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
        architectures=["DFlashDraftModel"],
    )
    config.num_target_layers = recipe.target_layers
    config.block_size = recipe.block_size
    config.dflash_config = {
        "mask_token_id": tokenizer.mask_token_id,
        "target_layer_ids": list(recipe.target_layer_ids),
    }
    return config


def block_masks(
    anchors: torch.Tensor, context: int, block: int, layers: list[tuple[bool, int | None]]
) -> list[torch.Tensor]:
    """Per-layer boolean masks [batch, 1, anchors*block, context + anchors*block].

    Reproduces what dflash's `_attention_mask` sees at inference for each block: the
    context features of positions before its anchor, its own block tokens (all, or the
    earlier ones when causal), each limited by the layer's window.
    """
    batch, count = anchors.shape
    offsets = torch.arange(block)
    query_pos = (anchors[:, :, None] + offsets).reshape(batch, count * block)
    query_anchor = anchors.repeat_interleave(block, dim=1)
    query_block = torch.arange(count).repeat_interleave(block)
    key_pos = torch.cat([torch.arange(context).expand(batch, context), query_pos], dim=1)
    key_block = torch.cat([torch.full((context,), -1), query_block])
    is_context = key_block < 0
    q_pos, k_pos = query_pos[:, :, None], key_pos[:, None, :]
    base = torch.where(
        is_context[None, None, :],
        k_pos < query_anchor[:, :, None],
        (key_block[None, None, :] == query_block[None, :, None]),
    )
    masks = []
    for causal, window in layers:
        visible = base.clone()
        if causal:
            visible &= k_pos <= q_pos
        if window is not None:
            visible &= q_pos - k_pos < window
            if not causal:
                visible &= k_pos - q_pos < window
        masks.append(visible[:, None])
    return masks


def train_draft(recipe: Recipe, tokenizer, target: Qwen3Target, sequences, out: Path):
    torch.manual_seed(recipe.seed + 30)
    config = draft_config(recipe, tokenizer)
    draft = DFlashDraftModel(config)
    # Train under the contract the reference implementation follows (SGLang's fixed one).
    table = resolve_layers(_config_dict(config), "fixed")
    layers = [(entry.causal, entry.window) for entry in table]
    fit_draft(recipe, target, draft, sequences, layers=layers,
              layer_ids=draft.target_layer_ids, block=recipe.block_size,
              pad=tokenizer.pad_token_id, mask_id=draft.mask_token_id, say=log)
    draft.save_pretrained(out)
    _strip_is_causal(out / "config.json")
    tokenizer.save_pretrained(out, save_jinja_files=False)
    return draft


def fit_draft(recipe: Recipe | SeedRecipe, target: Teacher, draft, sequences, *,
              layers: list[tuple[bool, int | None]], layer_ids: list[int], block: int,
              pad: int, mask_id: int, say: Callable[[str], None]) -> None:
    """Train the draft on the target's continuations (every pair alike), with exactly the
    inputs DFlash decoding gives it: the target's features at `layer_ids` of the positions
    before each anchor, the target's embedding of [anchor, mask, ...], logits through the
    target's head, each layer under its own mask (`layers`: causal, window); the target is
    frozen. It ends in eval mode."""
    for parameter in target.model.parameters():
        parameter.requires_grad_(False)
    count = recipe.draft_anchors
    weights = torch.exp(-torch.arange(block - 1, dtype=torch.float) / recipe.draft_loss_gamma)
    optimizer = torch.optim.AdamW(draft.parameters(), lr=recipe.draft_lr, weight_decay=0.01)
    schedule = _warmup_cosine(optimizer, recipe.draft_steps)
    rng = random.Random(recipe.seed + 31)
    draft.train()
    for step in range(recipe.draft_steps):
        picked = rng.sample(sequences, recipe.draft_batch)
        context = max(len(ids) for ids, _ in picked)
        ids = torch.full((len(picked), context), pad)
        anchors = torch.zeros((len(picked), count), dtype=torch.long)
        for row, (tokens, prompt_length) in enumerate(picked):
            ids[row, : len(tokens)] = torch.tensor(tokens)
            # Anchors start where decoding starts: the first generated token onwards.
            anchors[row] = torch.tensor(
                [rng.randint(prompt_length, len(tokens) - block) for _ in range(count)]
            )
        with torch.no_grad():
            features = target.features(ids, layer_ids)
        offsets = (anchors[:, :, None] + torch.arange(block)).view(len(picked), -1)
        block_ids = ids.gather(1, offsets)
        noise_ids = block_ids.view(len(picked), count, block).clone()
        noise_ids[:, :, 1:] = mask_id
        with torch.no_grad():
            noise = target.embed(noise_ids.view(len(picked), -1))
        positions = torch.cat([torch.arange(context).expand(len(picked), context), offsets],
                              dim=1)
        hidden = _draft_forward(draft, noise, features, positions,
                                block_masks(anchors, context, block, layers))
        logits = target.logits(hidden).view(len(picked), count, block, -1)[:, :, 1:]
        labels = block_ids.view(len(picked), count, block)[:, :, 1:]
        loss = draft_update(draft, optimizer, schedule, logits, labels, weights)
        if step % 50 == 0 or step == recipe.draft_steps - 1:
            log_draft_step(step, loss, logits, labels, say)
    draft.eval()


def draft_update(draft, optimizer, schedule, logits, labels, weights) -> torch.Tensor:
    """One optimiser step on the block loss: cross-entropy at every block offset after the
    anchor, weighted by offset (`weights`), averaged over the blocks (shared by the tiny
    pair's and the seed pairs' builds, so both train their drafts alike)."""
    losses = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1),
                             reduction="none").view_as(labels)
    loss = (losses * weights).sum() / (weights.sum() * labels.shape[0] * labels.shape[1])
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(draft.parameters(), 1.0)
    optimizer.step()
    schedule.step()
    return loss


def log_draft_step(step, loss, logits, labels, say) -> None:
    first = (logits[:, :, 0].argmax(-1) == labels[:, :, 0]).float().mean().item()
    say(f"draft step {step}: loss {loss.item():.3f}, offset-1 accuracy {first:.2f}")


def _draft_forward(draft, noise, features, positions, masks) -> torch.Tensor:
    """DFlashDraftModel.forward with one mask per layer (it accepts a single shared mask)."""
    hidden = noise
    context = draft.hidden_norm(draft.fc(features))
    embeddings = draft.rotary_emb(hidden, positions)
    for layer, mask in zip(draft.layers, masks, strict=True):
        hidden = layer(hidden_states=hidden, target_hidden=context, attention_mask=mask,
                       position_ids=positions, position_embeddings=embeddings)
    return draft.norm(hidden)


def _config_dict(config) -> dict:
    return json.loads(config.to_json_string())


def _strip_is_causal(path: Path) -> None:
    """Leave `is_causal` undeclared, like z-lab/gemma-4-31B-it-DFlash: the case that regressed."""
    data = json.loads(path.read_text())
    data.pop("is_causal", None)
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


def build(out: Path, recipe: Recipe = DEFAULT_RECIPE) -> None:
    """Write `target/`, `draft/` and `recipe.json` under `out`."""
    torch.set_num_threads(2)
    torch.use_deterministic_algorithms(True)
    started = time.perf_counter()
    target_dir, draft_dir = out / "target", out / "draft"
    tokenizer = build_tokenizer(recipe, target_dir)
    log(f"tokenizer: {len(tokenizer)} tokens")
    torch.manual_seed(recipe.seed)
    target = Qwen3Target(Qwen3ForCausalLM(target_config(recipe, tokenizer)))
    fit_target(recipe, target, tokenizer, log)
    target.model.save_pretrained(target_dir)
    log(f"target trained in {time.perf_counter() - started:.0f} s")
    sequences = distill_sequences(recipe, target, tokenizer, log)
    train_draft(recipe, tokenizer, target, sequences, draft_dir)
    elapsed = time.perf_counter() - started
    # No timings here: the folder must be bit-identical across builds of one recipe.
    record = {"recipe": recipe.to_json(), "digest": recipe.digest(), "torch": torch.__version__}
    (out / "recipe.json").write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    log(f"built in {elapsed:.0f} s -> {out}")


def build_arguments(argv: list[str] | None, description: str, *, pair: bool = False
                    ) -> tuple[argparse.Namespace, dict[str, object]]:
    """A build's command line (every build's: `--out DIR`, `--set FIELD=JSON`..., and a
    seed pair's `--pair`): its arguments and the recipe fields it overrides."""
    parser = argparse.ArgumentParser(description=description)
    if pair:
        parser.add_argument("--pair", required=True, help="gemma4 or muse_glimmer")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--set", action="append", default=[], metavar="FIELD=JSON",
                        help="override a recipe field (tests build a reduced recipe)")
    args = parser.parse_args(argv)
    overrides: dict[str, object] = {}
    for item in args.set:
        name, _, value = item.partition("=")
        overrides[name] = json.loads(value)
    return args, overrides


def main(argv: list[str] | None = None) -> int:
    args, overrides = build_arguments(argv, __doc__.splitlines()[0])
    build(args.out, with_overrides(DEFAULT_RECIPE, overrides))
    return 0


if __name__ == "__main__":
    sys.exit(main())
