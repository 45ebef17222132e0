"""What reached vLLM's DFlash draft at run time, read from vLLM's own objects.

Loaded by sitecustomize.py (this folder, first on the vLLM server's PYTHONPATH) only when
the harness names a record file. Nothing vLLM does is changed: its objects are read after
its own code ran, and one JSON line per clause is appended to the file
`HARNESS_CONTRACT_RECORD` names, in the format harness/run/runtime_contract.py reads:

- after `GPUModelRunner._setup_eagle3_aux_hidden_state_outputs` (the CPU runner's
  `load_model` calls it once the target and the DFlash drafter are loaded): the target
  layers configured for capture (its decoder's `aux_hidden_state_layers`: hidden_states[c]
  for each c, the audit's convention) and, at each eager forward of the target, which
  layer's output each captured tensor is: hooks keep the residual stream at every layer
  boundary (hidden_states + residual entering layer c, and leaving the last), and each
  tensor the decoder returns as an aux hidden state is matched to the boundary it equals
  (c, or -1 when it equals none), so a loop that captures at the wrong layer is seen even
  when the configured list is right (real vLLM runs it in `nox -s vllm_cpu` only); the
  block the drafter proposes
  (`num_speculative_tokens + 1` query tokens per request), the mask token id the drafter
  feeds its masked slots (`parallel_drafting_token_id`) and the one the draft model
  embeds (`mask_token_id`), the draft's decoder layers, the width its `fc` projects from
  (and, once, the width of the target hidden states the proposer hands the draft's
  `combine_hidden_states`), and whose embeddings and `lm_head` the draft ended up with
  (`_maybe_share_embeddings`, `_maybe_share_lm_head`) and, at its forward, whose it
  called: the embedding module that ran inside the draft's `embed_input_ids`, and the
  head the draft's `compute_logits` handed its logits processor, each by identity:
  `target` (the target's own object), `draft` (the one the draft holds, not the
  target's) or `other (its class)` (vLLM decides them from the checkpoint's weights at
  load, so the audit's column leaves them unresolved: runtime_contract.py compares the
  forward's answer with the load's);
- at each forward of the draft model (`DFlashQwen3Model.forward`, outside dummy runs):
  the block it was given, from its own arguments and the attention metadata of its first
  layer: the query tokens per request (`query_start_loc`; the block size) and the ids
  filling every position of a request's block after its first (the mask token id);
- from the CPU attention backend's `forward` (`CPUAttentionBackendImpl`, the call into
  `cpu_attention_with_kv_cache`): for each draft layer, the causality and window that
  reached the kernel, one line per distinct (layer, causal, window), to the file
  `HARNESS_ATTENTION_RECORD` names (harness/run/runtime_attention.py's format).
"""

from __future__ import annotations

import functools
import itertools
import json
import os
from collections.abc import Callable
from typing import Any

CONTRACT_ENV = "HARNESS_CONTRACT_RECORD"
ATTENTION_ENV = "HARNESS_ATTENTION_RECORD"
RUNNER_MODULE = "vllm.v1.worker.gpu_model_runner"
ATTENTION_MODULE = "vllm.v1.attention.backends.cpu_attn"
DRAFT_MODEL = "dflash"  # the model name runtime_attention.py reads as the draft's

_DRAFT_LAYERS: dict[int, int] = {}  # id(the draft layer's attention impl) -> layer index
_SEEN: set[tuple[int, bool, int | None]] = set()


def _append(env: str, line: dict[str, Any]) -> None:
    path = os.environ.get(env)
    if not path:
        return
    with open(path, "a", encoding="utf-8") as out:
        out.write(json.dumps({"pid": os.getpid(), **line}, sort_keys=True) + "\n")


def _write(clause: str, value: Any, where: str) -> None:
    _append(CONTRACT_ENV, {"clause": clause, "value": value, "where": where})


def _decoder(model: Any) -> Any:
    """The target's decoder, unwrapped as `SupportsEagle3.set_aux_hidden_state_layers`
    unwraps it (the language model of a multimodal model, then its `model`)."""
    parent = model
    if hasattr(model, "get_language_model"):
        parent = model.get_language_model()
    elif hasattr(model, "language_model"):
        parent = model.language_model
    return getattr(parent, "model", parent)


def _language_model(model: Any) -> Any:
    return model.get_language_model() if hasattr(model, "get_language_model") else model


def record_runner(runner: Any) -> None:
    """Read the loaded target and DFlash drafter of a model runner."""
    drafter = getattr(runner, "drafter", None)
    if drafter is None or getattr(drafter, "method", None) != "dflash":
        return
    where = type(drafter).__name__
    draft = getattr(drafter, "model", None)  # DFlashQwen3ForCausalLM
    inner = getattr(draft, "model", None)  # DFlashQwen3Model
    target = runner.get_model() if hasattr(runner, "get_model") else runner.model
    if getattr(drafter, "eagle3_use_aux_hidden_state", True):
        decoder = _decoder(target)
        layers = getattr(decoder, "aux_hidden_state_layers", None)
        if layers is not None:
            _write("taps", sorted({int(c) for c in layers}),
                   "target aux_hidden_state_layers")
            _observe_captures(decoder)
    _write("block_size", int(drafter.num_speculative_tokens) + 1,
           f"{where}: num_speculative_tokens + 1")
    _write("mask_token_id", int(drafter.parallel_drafting_token_id),
           f"{where}.parallel_drafting_token_id")
    own = getattr(inner, "mask_token_id", None)
    if own is not None:
        _write("mask_token_id", int(own), f"{type(inner).__name__}.mask_token_id")
    layers = getattr(inner, "layers", None)
    if layers is not None:
        _write("draft_layers", len(layers), f"{type(inner).__name__}.layers")
        for index, layer in enumerate(layers):
            impl = getattr(getattr(getattr(layer, "self_attn", None), "attn", None), "impl",
                           None)
            if impl is not None:
                _DRAFT_LAYERS[id(impl)] = index
    width = getattr(getattr(inner, "fc", None), "input_size", None)
    if isinstance(width, int):
        _write("fc_input_width", width, f"{type(inner).__name__}.fc")
    _record_delivered(draft)
    _observe_block(inner)
    language = _language_model(target)
    embed = getattr(getattr(language, "model", None), "embed_tokens", None)
    if embed is not None and inner is not None:
        _write("embeddings", "target" if inner.embed_tokens is embed else "draft",
               f"{where}._maybe_share_embeddings")
    head = getattr(language, "lm_head", None)
    if head is not None and draft is not None:
        _write("lm_head", "target" if getattr(draft, "lm_head", None) is head else "draft",
               f"{where}._maybe_share_lm_head")
    _observe_borrowed(draft, inner, embed, head)


def _whose(module: Any, target: Any, held: Any) -> str:
    """A module the draft called, by identity: the target's own, the one the draft holds,
    or another (named by its class)."""
    if module is target:
        return "target"
    if module is held:
        return "draft"
    return f"other ({type(module).__name__})"


def _observe_borrowed(draft: Any, inner: Any, embed: Any, head: Any) -> None:
    """At the draft's forward: which embedding module ran inside its embed_input_ids, and
    which head its compute_logits gave the logits processor (each distinct answer
    once)."""
    import torch  # vLLM's server process has it; this module is imported before it is

    written: set[tuple[str, str]] = set()

    def once(clause: str, value: str, where: str) -> None:
        if (clause, value) not in written:
            written.add((clause, value))
            _write(clause, value, where)

    embedding = getattr(inner, "embed_input_ids", None)
    if embed is not None and callable(embedding) \
            and not getattr(embedding, "_harness_recorded", False):

        @functools.wraps(embedding)
        def embed_input_ids(*args: Any, **kwargs: Any) -> Any:
            # every embedding module that runs inside, whichever it is (the one the draft
            # holds, swapped after load or not, or one its code builds or borrows)
            ran: list[Any] = []

            def hook(module: Any, *_: Any) -> None:
                if hasattr(module, "num_embeddings"):
                    ran.append(module)

            handle = torch.nn.modules.module.register_module_forward_hook(hook)
            try:
                output = embedding(*args, **kwargs)
            finally:
                handle.remove()
            where = ("the draft's embed_input_ids at its forward (the embedding module "
                     "that ran)")
            held = getattr(inner, "embed_tokens", None)
            for module in ran:
                once("embeddings", _whose(module, embed, held), where)
            if not ran:
                once("embeddings", "other (no embedding module ran)", where)
            return output

        embed_input_ids._harness_recorded = True  # type: ignore[attr-defined]
        inner.embed_input_ids = embed_input_ids  # this instance only
    processor = getattr(draft, "logits_processor", None)
    if head is not None and processor is not None \
            and hasattr(processor, "register_forward_pre_hook") \
            and not getattr(processor, "_harness_head_observed", False):
        processor._harness_head_observed = True

        def given(_module: Any, args: tuple[Any, ...]) -> None:
            if args:
                once("lm_head", _whose(args[0], head, getattr(draft, "lm_head", None)),
                     "the draft's compute_logits at its forward (the head its logits "
                     "processor was given)")

        processor.register_forward_pre_hook(given)


def _forward_metadata(layer_name: str) -> Any:
    """The attention metadata vLLM's forward context holds for one layer now (None
    outside a forward with metadata: the dummy runs of profiling and warm-up)."""
    try:
        from vllm.forward_context import get_forward_context, is_forward_context_available
    except ImportError:
        return None
    if not is_forward_context_available():
        return None
    metadata = get_forward_context().attn_metadata
    return metadata.get(layer_name) if isinstance(metadata, dict) else None


def _observe_block(inner: Any) -> None:
    """At each forward of the draft model: the block each request's query was (its width,
    from `query_start_loc`) and the ids after its first token (the mask token id the
    block was filled with); each distinct answer once."""
    layers = getattr(inner, "layers", None)
    original = getattr(inner, "forward", None)
    if not layers or original is None or getattr(original, "_harness_recorded", False):
        return
    name = getattr(getattr(getattr(layers[0], "self_attn", None), "attn", None),
                   "layer_name", None)
    written: set[tuple[str, int]] = set()

    def once(clause: str, value: int, where: str) -> None:
        if (clause, value) not in written:
            written.add((clause, value))
            _write(clause, value, where)

    def observe(input_ids: Any) -> None:
        metadata = _forward_metadata(name) if name else None
        starts = getattr(metadata, "query_start_loc", None)
        if starts is None or input_ids is None:
            return
        starts, ids = [int(v) for v in starts.tolist()], input_ids.tolist()
        for begin, end in itertools.pairwise(starts):
            if end <= begin or end > len(ids):
                continue
            once("block_size", end - begin, "the draft forward's query block per request "
                 "(query_start_loc of its attention metadata)")
            for token in sorted(set(ids[begin + 1:end])):
                once("mask_token_id", int(token), "the draft forward's input_ids after "
                     "each request's first (the block's masked positions)")

    # the instance's forward, as for the target's decoder: `support_torch_compile`'s eager
    # __call__ calls `self.forward` directly
    @functools.wraps(original)
    def forward(input_ids: Any = None, *args: Any, **kwargs: Any) -> Any:
        observe(input_ids)
        return original(input_ids, *args, **kwargs)

    forward._harness_recorded = True  # type: ignore[attr-defined]
    inner.forward = forward  # this instance only


def _stream(hidden: Any, residual: Any) -> Any:
    """The residual stream at a layer boundary, as vLLM's loop captures it."""
    return hidden if residual is None else hidden + residual


def _observe_captures(decoder: Any) -> None:
    """At each eager forward of the target's decoder, which boundary each captured tensor
    equals (hidden_states[c]); one line per distinct list."""
    import torch  # vLLM's server process has it; this module is imported before it is

    layers = getattr(decoder, "layers", None)
    if layers is None or not hasattr(decoder, "register_forward_hook") \
            or getattr(decoder, "_harness_captures_observed", False):
        return
    decoder._harness_captures_observed = True
    boundaries: dict[int, Any] = {}
    written: set[tuple[int, ...]] = set()

    def entering(index: int) -> Any:
        def hook(_module: Any, args: tuple[Any, ...]) -> None:
            if not torch.compiler.is_compiling() and len(args) >= 2:
                boundaries[index] = _stream(args[1], args[2] if len(args) > 2 else None)
        return hook

    def leaving(index: int) -> Any:
        def hook(_module: Any, _args: Any, output: Any) -> None:
            if not torch.compiler.is_compiling() and isinstance(output, tuple) \
                    and len(output) == 2:
                boundaries[index + 1] = _stream(*output)
        return hook

    def finish(output: Any) -> None:
        if torch.compiler.is_compiling() or not (
                isinstance(output, tuple) and len(output) == 2
                and isinstance(output[1], list | tuple) and output[1]):
            return
        if len(boundaries) != len(layers) + 1:
            return  # a loop these hooks do not fit (keyword arguments): nothing claimed
        taps = []
        for tensor in output[1]:
            equal = [c for c, kept in boundaries.items()
                     if kept.shape == tensor.shape and torch.equal(kept, tensor)]
            taps.append(equal[0] if len(equal) == 1 else -1)
        key = tuple(sorted(taps))
        if key not in written:
            written.add(key)
            _write("taps", list(key), "target forward: the layer boundary each captured "
                   "tensor equals (hidden_states[c], -1 for none)")
        boundaries.clear()

    for index, layer in enumerate(layers):
        if hasattr(layer, "register_forward_pre_hook"):
            layer.register_forward_pre_hook(entering(index))
            layer.register_forward_hook(leaving(index))
    # the instance's forward, not module hooks: vLLM's `support_torch_compile` __call__
    # calls `self.forward` directly when not compiling (--enforce-eager), past the hooks
    original = decoder.forward

    @functools.wraps(original)
    def forward(*args: Any, **kwargs: Any) -> Any:
        boundaries.clear()
        output = original(*args, **kwargs)
        finish(output)
        return output

    decoder.forward = forward


def _record_delivered(draft: Any) -> None:
    """Record, once, the width of the target hidden states the proposer hands the draft
    (`SpecDecodeBaseProposer.propose` -> the draft's `combine_hidden_states`)."""
    original = getattr(draft, "combine_hidden_states", None)
    if original is None or getattr(original, "_harness_recorded", False):
        return
    done: list[bool] = []

    @functools.wraps(original)
    def combine_hidden_states(hidden_states: Any, *args: Any, **kwargs: Any) -> Any:
        if not done and getattr(hidden_states, "dim", lambda: 0)() == 2:
            done.append(True)
            _write("fc_input_width", int(hidden_states.shape[-1]),
                   "combine_hidden_states (target hidden states received)")
        return original(hidden_states, *args, **kwargs)

    combine_hidden_states._harness_recorded = True  # type: ignore[attr-defined]
    draft.combine_hidden_states = combine_hidden_states  # this instance only


def _wrap_method(module: Any, class_name: str, method: str,
                 wrap: Callable[[Any], Callable[..., Any]]) -> None:
    """`module.class_name.method` replaced, once, by `wrap(original)`, which calls the
    original and reads what it did (nothing where vLLM has no such class or method)."""
    cls = getattr(module, class_name, None)
    original = getattr(cls, method, None)
    if cls is None or original is None or getattr(original, "_harness_recorded", False):
        return
    wrapper = functools.wraps(original)(wrap(original))
    wrapper._harness_recorded = True  # type: ignore[attr-defined]
    setattr(cls, method, wrapper)


def install_runner(module: Any) -> None:
    def wrap(original: Callable[..., Any]) -> Callable[..., Any]:
        def setup(self: Any, *args: Any, **kwargs: Any) -> Any:
            result = original(self, *args, **kwargs)
            record_runner(self)
            return result
        return setup

    _wrap_method(module, "GPUModelRunner", "_setup_eagle3_aux_hidden_state_outputs", wrap)


def record_call(impl: Any, attn_metadata: Any) -> None:
    """One kernel call of a draft layer: the causality and window it received."""
    index = _DRAFT_LAYERS.get(id(impl))
    causal = getattr(attn_metadata, "causal", None)
    if index is None or not isinstance(causal, bool):
        return
    window = getattr(impl, "sliding_window", None)
    window = None if window is None or window < 0 else int(window)
    key = (index, causal, window)
    if key in _SEEN:
        return
    _SEEN.add(key)
    _append(ATTENTION_ENV, {"model": DRAFT_MODEL, "layer": index, "kernel": "extend",
                            "causal": causal, "window": window})


def install_attention(module: Any) -> None:
    def wrap(original: Callable[..., Any]) -> Callable[..., Any]:
        def forward(self: Any, layer: Any, query: Any, key: Any, value: Any, kv_cache: Any,
                    attn_metadata: Any, *args: Any, **kwargs: Any) -> Any:
            if _DRAFT_LAYERS and attn_metadata is not None:
                record_call(self, attn_metadata)
            return original(self, layer, query, key, value, kv_cache, attn_metadata, *args,
                            **kwargs)
        return forward

    _wrap_method(module, "CPUAttentionBackendImpl", "forward", wrap)


def hooks() -> dict[str, Any]:
    """module -> what to install once it is imported."""
    found: dict[str, Any] = {}
    if os.environ.get(CONTRACT_ENV) or os.environ.get(ATTENTION_ENV):
        found[RUNNER_MODULE] = install_runner
    if os.environ.get(ATTENTION_ENV):
        found[ATTENTION_MODULE] = install_attention
    return found
