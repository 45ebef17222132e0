"""DFlash speculative decoding on CPU with exact per-request accounting.

This is `dflash.model.dflash_generate` (the DFlash authors' reference loop) step for step,
built from the same pieces of the `dflash` package (`extract_context_feature`, its caches,
`_sampling_probs`, the draft's `compute_logits`), with what a server needs added:

- exact counts: verify steps (target forwards that verify a block) and accepted drafts
  per step; dflash's own `return_stats=True` calls `torch.cuda.synchronize()` and fails on
  CPU, and it does not report verify counts per request anyway;
- stop strings (SGLang semantics: stop once the decoded text contains one; the returned
  text excludes it) besides the EOS token;
- a per-request `torch.Generator`, so sampled decoding is reproducible under concurrency;
- the draft-noise knob (`draft_noise.DraftNoise`);
- forced acceptance (`reference_engine.forced`, SGLang's SGLANG_SIMULATE_ACC_LEN
  semantics): each verify step commits a forced count of tokens instead of the accepted run;
- SGLang's block near the end: SGLang always verifies a full block and trims the output
  to `max_new_tokens` afterwards, so the last step's correct drafts are counted over the
  whole block (`dflash_generate` shrinks the last block instead);
- a per-step callback, so a server can stream.

With noise 0 and temperature 0 the output ids and the accept lengths of every step but
the last equal `dflash_generate`'s (tests/reference_engine check it).
"""

from __future__ import annotations

import hashlib
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from dflash.model import (
    _crop_to,
    _draft_value,
    _make_cache,
    _raw_input_embeddings,
    _sampling_probs,
    extract_context_feature,
)

from reference_engine.draft_noise import DraftNoise
from reference_engine.forced import ForcedAcceptance
from reference_engine.pacing import hold_until


@dataclass
class Generation:
    """One request's result and the counts SGLang's meta_info is built from."""

    output_ids: list[int]
    prompt_tokens: int
    finish_reason: dict[str, Any]
    matched_stop: str | int | None = None
    text: str = ""
    accepted_drafts: list[int] = field(default_factory=list)  # per verify step, bonus excluded
    # Tokens each verify step added to the output: accepted + 1, less any cut by a stop or
    # max_new_tokens. Sums to completion_tokens - 1 (the first token comes from prefill).
    produced: list[int] = field(default_factory=list)

    @property
    def completion_tokens(self) -> int:
        return len(self.output_ids)

    @property
    def verify_steps(self) -> int:
        return len(self.accepted_drafts)

    @property
    def accept_tokens(self) -> int:
        """What SGLang adds to the server-wide count: correct drafts + 1 per verify step.

        `update_spec_metrics(bs, num_correct_drafts, num_accept_tokens=num_correct_drafts +
        bs)` (0.5.23 batch_result_processor): the step's whole accepted run, even when a
        stop string or max_new_tokens then cuts the output.
        """
        return sum(self.accepted_drafts) + self.verify_steps

    def to_dict(self) -> dict[str, Any]:
        return {"output_ids": self.output_ids, "prompt_tokens": self.prompt_tokens,
                "finish_reason": self.finish_reason, "matched_stop": self.matched_stop,
                "text": self.text, "accepted_drafts": self.accepted_drafts,
                "produced": self.produced}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Generation:
        return cls(**data)


StepCallback = Callable[[list[int]], None]  # the kept output ids so far, after each step


def request_key(prompt_ids: list[int], server_seed: int, seed: int | None) -> str:
    """Identifies a request by content, not arrival order, so results do not depend on queueing."""
    digest = hashlib.sha256(repr((prompt_ids, server_seed, seed)).encode()).hexdigest()
    return digest[:16]


class SpeculativeDecoder:
    """Target + DFlash draft + tokenizer; `generate` is not thread-safe (one worker calls it)."""

    def __init__(self, target, draft, tokenizer, block_size: int, noise: DraftNoise,
                 forced: ForcedAcceptance | None = None, target_forward_s: float = 0.0
                 ) -> None:
        self.target, self.draft, self.tokenizer = target, draft, tokenizer
        self.block_size, self.noise, self.forced = block_size, noise, forced
        # REFERENCE_TARGET_FORWARD_S (`pacing.py`): the least time a target forward takes
        self.target_forward_s = target_forward_s
        self.vocab_size = int(target.config.vocab_size)
        self.first_request: float | None = None  # the planted drift's clock starts here
        # where the models' weights lie ("cpu" or "cuda:0"): every tensor of a request too
        self.device = next(target.parameters()).device

    @torch.inference_mode()
    def generate(
        self,
        prompt: str | list[int],
        max_new_tokens: int,
        temperature: float = 0.0,
        top_p: float = 1.0,
        top_k: int = 0,
        stop: list[str] | None = None,
        seed: int | None = None,
        on_step: StepCallback | None = None,
    ) -> Generation:
        prompt_ids = self.tokenizer(prompt)["input_ids"] if isinstance(prompt, str) else prompt
        key = request_key(list(prompt_ids), self.noise.seed, seed)
        generator = torch.Generator(device=self.device).manual_seed(int(key, 16) % (2**63))
        run = _Run(self, list(prompt_ids), max_new_tokens, temperature, top_p, top_k,
                   stop or [], key, generator)
        run.on_step = on_step
        now = time.monotonic()
        self.first_request = now if self.first_request is None else self.first_request
        run.noise_rate = self.noise.rate_after(now - self.first_request)
        return run.execute()


class _Run:
    """State of one generation; mirrors the variables of `dflash_generate`."""

    def __init__(self, decoder: SpeculativeDecoder, prompt_ids: list[int], max_new_tokens: int,
                 temperature: float, top_p: float, top_k: int, stop: list[str], key: str,
                 generator: torch.Generator) -> None:
        self.d = decoder
        self.prompt_ids = prompt_ids
        self.max_new_tokens = max_new_tokens
        self.temperature, self.top_p, self.top_k = temperature, top_p, top_k
        self.stop, self.key, self.generator = stop, key, generator
        self.eos = decoder.tokenizer.eos_token_id
        self.on_step: StepCallback | None = None
        self.noise_rate = decoder.noise.rate  # fixed for the request (a planted drift)

    def sample(self, logits: torch.Tensor) -> torch.Tensor:
        if self.temperature <= 0:
            return torch.argmax(logits, dim=-1)
        return self.sample_probs(self.probs(logits))

    def probs(self, logits: torch.Tensor) -> torch.Tensor:
        return _sampling_probs(logits, self.temperature, self.top_p, self.top_k)

    def sample_probs(self, probs: torch.Tensor) -> torch.Tensor:
        flat = probs.reshape(-1, probs.shape[-1])
        return torch.multinomial(flat, 1, generator=self.generator).view(probs.shape[:-1])

    def execute(self) -> Generation:
        d, model, target = self.d, self.d.draft, self.d.target
        device = d.device
        input_ids = torch.tensor([self.prompt_ids], device=device)
        num_input = input_ids.shape[1]
        max_length = num_input + self.max_new_tokens
        block_size = d.block_size
        # Room for a full block past max_length: SGLang verifies whole blocks to the end.
        output_ids = torch.full((1, max_length + block_size + 1), model.mask_token_id,
                                dtype=torch.long, device=device)
        position_ids = torch.arange(output_ids.shape[1], device=device).unsqueeze(0)
        cache_target = _make_cache(target.config)
        cache_draft = _make_cache(model.config)

        output = self.target_forward(
            input_ids, position_ids=position_ids[:, :num_input], past_key_values=cache_target,
            use_cache=True, logits_to_keep=1, output_hidden_states=block_size > 1)
        output_ids[:, :num_input] = input_ids
        output_ids[:, num_input] = self.sample(output.logits)[0, -1]
        if block_size > 1:
            target_hidden = extract_context_feature(output.hidden_states, model.target_layer_ids)
        _crop_to(cache_target, num_input)

        result = Generation(output_ids=[], prompt_tokens=num_input,
                            finish_reason={"type": "length", "length": self.max_new_tokens})
        self.result = result
        start = num_input
        stopped = self.check_stop(output_ids, num_input, num_input + 1, result)
        self.report()
        embed_scale = float(_draft_value(model.config, "input_embedding_scale", 1.0))
        while start + 1 < max_length and not stopped:
            verify_size = block_size
            block = output_ids[:, start : start + verify_size].clone()
            draft_probs = None
            if verify_size > 1:
                noise_embedding = _raw_input_embeddings(target, block, embed_scale)
                context_start = start - target_hidden.shape[1]
                draft_hidden = model(
                    target_hidden=target_hidden, noise_embedding=noise_embedding,
                    position_ids=position_ids[:, context_start : start + verify_size],
                    past_key_values=cache_draft, use_cache=True,
                )[:, 1 - verify_size :, :]
                _crop_to(cache_draft, start)
                draft_logits = model.compute_logits(draft_hidden, target.lm_head)
                draft_probs = self.propose(draft_logits, block, start)
            output = self.target_forward(
                block, position_ids=position_ids[:, start : start + verify_size],
                past_key_values=cache_target, use_cache=True,
                output_hidden_states=verify_size > 1)
            accepted, bonus = self.verify(block, output.logits, draft_probs, verify_size)
            if d.forced is not None and verify_size > 1:
                accepted, bonus = self.force(d.forced, output.logits, start, verify_size)
            output_ids[:, start : start + accepted + 1] = block[:, : accepted + 1]
            output_ids[:, start + accepted + 1] = bonus
            produced = min(accepted + 1, max_length - start - 1)
            result.accepted_drafts.append(accepted)
            stopped = self.check_stop(output_ids, num_input, start + produced + 1, result)
            if stopped:
                produced = num_input + len(result.output_ids) - 1 - start
            result.produced.append(produced)
            self.report()
            start += produced
            _crop_to(cache_target, start)
            if verify_size > 1:
                features = extract_context_feature(output.hidden_states, model.target_layer_ids)
                target_hidden = features[:, :produced, :]
        if not stopped:
            result.output_ids = output_ids[0, num_input : min(start + 1, max_length)].tolist()
        result.text = self.text(result.output_ids, result.matched_stop)
        return result

    def target_forward(self, *args: Any, **kwargs: Any) -> Any:
        """The target's forward, taking at least the decoder's `target_forward_s`."""
        started = time.perf_counter()
        output = self.d.target(*args, **kwargs)
        hold_until(started, self.d.target_forward_s)
        return output

    def report(self) -> None:
        if self.on_step is not None:
            self.on_step(list(self.result.output_ids))

    def propose(self, draft_logits: torch.Tensor, block: torch.Tensor, start: int):
        """Fill block[:, 1:] with draft tokens; return the proposal distribution (sampled)."""
        noise, rate = self.d.noise, self.noise_rate
        if self.temperature > 0:
            probs = self.probs(draft_logits)
            if rate > 0:
                probs = (1 - rate) * probs + rate / probs.shape[-1]
            block[:, 1:] = self.sample_probs(probs)
            return probs
        block[:, 1:] = torch.argmax(draft_logits, dim=-1)
        if rate > 0:
            for offset in range(1, block.shape[1]):
                draw = noise.uniform(self.key, start + offset)
                if draw.random() < rate:
                    shift = 1 + draw.randrange(self.d.vocab_size - 1)
                    block[0, offset] = (int(block[0, offset]) + shift) % self.d.vocab_size
        return None

    def verify(self, block, logits, draft_probs, verify_size) -> tuple[int, torch.Tensor]:
        """Accepted draft count and the bonus token, as in dflash_generate."""
        if self.temperature <= 0:
            posterior = torch.argmax(logits, dim=-1)
            matches = (block[:, 1:] == posterior[:, :-1]).cumprod(dim=1).sum(dim=1)
            accepted = int(matches[0].item())
            return accepted, posterior[0, accepted]
        target_probs = self.probs(logits)
        if verify_size <= 1:
            return 0, self.sample_probs(target_probs[:, -1])[0]
        return self.rejection_sample(block[:, 1:], target_probs, draft_probs)

    def force(self, forced: ForcedAcceptance, logits, start: int, verify_size: int
              ) -> tuple[int, torch.Tensor]:
        """The forced step (SGLang's apply_dflash_simulated_acceptance, real-draft-token
        mode): commit a drawn count c in [1, verify_size], the draft's first c - 1 tokens
        and the target's token after them, whatever the verify found."""
        draw = random.Random(f"forced:{self.d.noise.seed}:{self.key}:{start}")
        accepted = forced.committed(verify_size, draw) - 1
        return accepted, self.sample(logits[:, accepted])[0]

    def rejection_sample(self, drafts, target_probs, draft_probs) -> tuple[int, torch.Tensor]:
        """dflash's `_rejection_sample`, drawing from this request's generator."""
        gamma = drafts.shape[1]
        p = target_probs[:, :gamma].gather(-1, drafts[..., None])[..., 0]
        q = draft_probs.gather(-1, drafts[..., None])[..., 0]
        draws = torch.rand(q.shape, generator=self.generator, device=q.device)
        accepted = int((draws * q < p).to(torch.int32).cumprod(-1).sum(-1)[0].item())
        if accepted == gamma:
            return accepted, self.sample_probs(target_probs[:, -1])[0]
        residual = (target_probs[0, accepted] - draft_probs[0, accepted]).clamp_min(0)
        total = residual.sum()
        residual = residual / total if total > 0 else target_probs[0, accepted]
        return accepted, self.sample_probs(residual[None])[0]

    def check_stop(self, output_ids, num_input: int, end: int, result: Generation) -> bool:
        """Stop at EOS or at the first token whose decoded text completes a stop string.

        Records the kept output ids (up to and including the stopping token) in `result`.
        """
        ids = output_ids[0, num_input:end].tolist()
        previous = len(result.output_ids)
        for count in range(max(previous, 1), len(ids) + 1):
            token = ids[count - 1]
            if token == self.eos:
                result.output_ids = ids[:count]
                result.finish_reason = {"type": "stop", "matched": token}
                result.matched_stop = token
                return True
            if self.stop:
                text = self.d.tokenizer.decode(ids[:count], skip_special_tokens=True)
                for stop in self.stop:
                    if stop and stop in text:
                        result.output_ids = ids[:count]
                        result.finish_reason = {"type": "stop", "matched": stop}
                        result.matched_stop = stop
                        return True
        result.output_ids = ids
        return False

    def text(self, output_ids: list[int], matched: str | int | None) -> str:
        text = self.d.tokenizer.decode(output_ids, skip_special_tokens=True)
        if isinstance(matched, str):
            text = text[: text.find(matched)]
        return text
