"""What reached the DFlash draft at run time, recorded for the harness (test-only).

With `HARNESS_CONTRACT_RECORD` naming a file, `sitecustomize.py` installs this when
SGLang's DFLASH worker module is imported. Nothing SGLang does is changed: its own objects
are read after its own code has run, and one JSON line per clause is appended:

- after `DFlashWorkerV2.__init__`: the block size the worker runs with (`block_size`), the
  mask token and its id (`_mask_token`, `_mask_token_id`), the draft's decoder layers and
  the width its `fc` projects from, and whose `lm_head` the draft uses;
- at the target's forward, when each capture is taken: the taps, observed rather than
  read from the configured `layers_to_capture`. Hooks on the target's decoder layers count
  the layers that have run in the pass; a capture (SGLang's `AuxHiddenStateList.capture`,
  or its packer's, 0.5.21+) taken after c layers ran is hidden_states[c] (the output of
  layer c - 1, the harness's stated convention), wherever the release takes it: at the
  next layer's input boundary, in the loop, or after the last layer. A forward loop that
  captures at the wrong layer is seen here while its configured list still looks right.
  A model whose loop appends to a plain list instead (Muse Glimmer's in 0.5.23) is observed
  by what its forward returns: each captured tensor is matched, by identity, to the target
  layer it was given as input (hidden_states[i]). Releases with no capture method at all
  (0.5.20 and older) are not hooked; for them the configured list is recorded, saying so
  in its `where`;
- from `_resolve_dflash_embedding_module` (0.5.19+): whose embeddings it returned, and,
  once the draft's block is embedded through it (`embed_module(block_ids)`, a
  [requests, block] tensor of ids), the block size and mask id that block was given: its
  width, and the id filling every position after the anchor;
- from the draft's `project_target_hidden`, once: the width of the target hidden states
  that reached it (`fc_input_width` as delivered);
- at the draft's forward (`DFlashDraftModel.forward`), what it was given: the block of ids
  (`forward_batch.input_ids`, [requests, block]: its width and the id after each anchor),
  its own `block_size` (what `set_block_size` gave it), and whose embedding module made its
  `input_embeds` (matched to the outputs of the target's and the draft's embedding modules,
  hooked once the worker is built: their object is the target's own, or the draft's);
- at the draft step's head (`_greedy_sample_from_vocab_parallel_head`, the eager greedy
  path that CPU runs): the module passed as `lm_head`, by identity with the target's
  `lm_head` (or the draft's own, or either one's embeddings).

The harness compares them with the audit's clauses for the build (harness/run/
runtime_contract.py); a difference fails the run naming the clause.
"""

from __future__ import annotations

import functools
import json
import os
from typing import Any

RECORD_ENV = "HARNESS_CONTRACT_RECORD"
WORKER_MODULE = "sglang.srt.speculative.dflash_worker_v2"
DRAFT_MODULE = "sglang.srt.models.dflash"
CAPTURE_MODULE = "sglang.srt.model_executor.model_runner_components.attention_backend_setup"


def _write(clause: str, value: Any, where: str) -> None:
    path = os.environ.get(RECORD_ENV)
    if not path:
        return
    line = {"pid": os.getpid(), "clause": clause, "value": value, "where": where}
    with open(path, "a", encoding="utf-8") as out:
        out.write(json.dumps(line, sort_keys=True) + "\n")


def _capture_holder(model: Any) -> Any:
    """The module whose forward loop captures (the model or its inner one): the one holding
    both `layers_to_capture` and its decoder `layers`."""
    for holder in (getattr(model, "model", None), getattr(model, "language_model", None),
                   getattr(getattr(model, "language_model", None), "model", None), model):
        if holder is not None and getattr(holder, "layers_to_capture", None):
            return holder
    return None


class _Pass:
    """The target's forward pass in progress: how many decoder layers have run, and the
    layer counts at which captures were taken."""

    def __init__(self) -> None:
        self.active = False
        self.ran = 0
        self.taken: set[int] = set()
        self.entered: dict[int, int] = {}  # id of a tensor a layer was given -> that layer
        self.written: set[tuple[int, ...]] = set()

    def start(self, *_: Any) -> None:
        self.active, self.ran, self.taken, self.entered = True, 0, set(), {}

    def entering(self, index: int) -> Any:
        def hook(_module: Any, args: tuple[Any, ...]) -> None:
            self.ran = index  # a capture at this layer's input is hidden_states[index]
            for value in args:  # the latest layer given a live tensor is the one it entered
                if hasattr(value, "data_ptr"):
                    self.entered[id(value)] = index
        return hook

    def leaving(self, index: int) -> Any:
        def hook(*_: Any) -> None:
            self.ran = index + 1
        return hook

    def capture(self) -> None:
        if self.active:
            self.taken.add(self.ran)

    def finish(self, _module: Any, _args: Any, output: Any) -> None:
        self.active = False
        taps = tuple(sorted(self.taken))
        where = "target forward: captures taken after that many target layers ran " \
                "(hidden_states[c])"
        if not taps:
            # A model whose loop appends to a plain list (Muse Glimmer's, 0.5.23): the
            # tensors it returns beside its output, each matched to the layer it entered
            # (-1: one no layer was given, e.g. a sum made for the capture).
            captured = output[1] if isinstance(output, tuple) and len(output) == 2 else None
            if isinstance(captured, list) and captured:
                taps = tuple(self.entered.get(id(value), -1) for value in captured)
                where = "target forward: the tensors its loop returned, each the input " \
                        "of that target layer (hidden_states[i])"
        self.entered = {}
        if taps and taps not in self.written:
            self.written.add(taps)
            _write("taps", list(taps), where)


_PASS = _Pass()


def _observe_captures(holder: Any) -> bool:
    """Hook the holder's decoder layers and SGLang's capture methods; False when this
    release has no capture method to observe (its loop appends to a plain list)."""
    try:
        from sglang.srt.layers import aux_hidden_states as aux
    except ImportError:
        return False
    layers = getattr(holder, "layers", None)
    if layers is None or not hasattr(holder, "register_forward_pre_hook"):
        return False
    for cls in (getattr(aux, "AuxHiddenStateList", None),
                getattr(aux, "AuxHiddenStatePacker", None)):
        original = getattr(cls, "capture", None)
        if original is None or getattr(original, "_harness_recorded", False):
            continue

        def capture(self: Any, *args: Any, _original: Any = original, **kwargs: Any) -> Any:
            _PASS.capture()
            return _original(self, *args, **kwargs)

        capture._harness_recorded = True  # type: ignore[attr-defined]
        cls.capture = capture  # type: ignore[union-attr]
    for index, layer in enumerate(layers):
        if hasattr(layer, "register_forward_pre_hook"):
            layer.register_forward_pre_hook(_PASS.entering(index))
            layer.register_forward_hook(_PASS.leaving(index))
    holder.register_forward_pre_hook(_PASS.start)
    holder.register_forward_hook(_PASS.finish)
    return True


def _fc_width(draft: Any) -> int | None:
    fc = getattr(draft, "fc", None)
    for name in ("in_features", "input_size"):
        value = getattr(fc, name, None)
        if isinstance(value, int):
            return value
    return None


class _Borrowed:
    """The modules the draft may call, once the worker is built: the target's and the
    draft's embeddings and heads, and the latest draft block each embedding embedded."""

    def __init__(self) -> None:
        self.modules: list[tuple[str, Any]] = []  # (whose, module), identity compared
        self.embedded: dict[str, Any] = {}  # whose embedding -> its latest 2-D output
        self.scale = 1.0  # the worker's noise-embedding scale (gemma-4's sqrt(hidden))
        self.written: set[tuple[str, object, str]] = set()

    def whose(self, module: Any) -> str:
        for name, known in self.modules:
            if module is not None and (module is known
                                       or module is getattr(known, "base_layer", None)):
                return name
        return f"other ({type(module).__name__})"

    def write_once(self, clause: str, value: object, where: str) -> None:
        if (clause, value, where) not in self.written:
            self.written.add((clause, value, where))
            _write(clause, value, where)

    def watch(self, draft: Any, target: Any, scale: object) -> None:
        self.scale = float(scale) if isinstance(scale, int | float) else 1.0
        for owner, name in ((target, "target"), (draft, "draft")):
            head = getattr(owner, "lm_head", None)
            if head is not None:
                self.modules.append((name, head))
            get = getattr(owner, "get_input_embeddings", None)
            embedding = get() if callable(get) else None
            if embedding is None:
                continue
            self.modules.append((f"{name} embeddings", embedding))
            if hasattr(embedding, "register_forward_hook"):
                embedding.register_forward_hook(self._embedded_by(name))

    def _embedded_by(self, whose: str) -> Any:
        def hook(_module: Any, args: tuple[Any, ...], output: Any) -> None:
            ids = args[0] if args else None
            if getattr(ids, "dim", None) is not None and ids.dim() == 2:  # a draft block
                self.embedded[whose] = output
        return hook

    def embedding_of(self, input_embeds: Any) -> str:
        """Whose embedding module produced the draft's input_embeds (the same storage, or
        its output times the worker's scale), else "other"."""
        for whose, output in self.embedded.items():
            if output.numel() != input_embeds.numel():
                continue
            if output.data_ptr() == input_embeds.data_ptr():
                return whose
            import torch  # lazy: this module loads in every process on the server's path

            # the worker's own operation (`noise_embedding * scale`, in its dtype)
            if torch.allclose(output.reshape(input_embeds.shape) * self.scale, input_embeds):
                return whose
        return "other (no embedding module's output)"


_BORROWED = _Borrowed()


def _after_init(worker: Any) -> None:
    draft = getattr(worker, "draft_model", None)
    runner = getattr(getattr(worker, "target_worker", None), "model_runner", None)
    target = getattr(runner, "model", None)
    where = "DFlashWorkerV2.__init__"
    _BORROWED.watch(draft, target, getattr(worker, "_noise_embed_scale", 1.0))
    _write("block_size", int(worker.block_size), where)
    if isinstance(getattr(worker, "_mask_token", None), str):
        _write("mask_token", worker._mask_token, where)
    if getattr(worker, "_mask_token_id", None) is not None:
        _write("mask_token_id", int(worker._mask_token_id), where)
    layers = getattr(draft, "layers", None)
    if layers is not None:
        _write("draft_layers", len(layers), where)
    width = _fc_width(draft)
    if width is not None:
        _write("fc_input_width", width, where + " (fc)")
    own = getattr(draft, "lm_head", None)
    borrowed = own is None or own is getattr(target, "lm_head", None)
    _write("lm_head", "target" if borrowed else "draft", where)


def install_worker(module: Any) -> None:
    """Wrap the worker's __init__ and the embedding resolver, reading what they made."""
    cls = getattr(module, "DFlashWorkerV2", None)
    if cls is not None and not getattr(cls.__init__, "_harness_recorded", False):
        original = cls.__init__

        @functools.wraps(original)
        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            original(self, *args, **kwargs)
            _after_init(self)

        __init__._harness_recorded = True  # type: ignore[attr-defined]
        cls.__init__ = __init__
    head = getattr(cls, "_greedy_sample_from_vocab_parallel_head", None)
    if head is not None and not getattr(head, "_harness_recorded", False):
        @functools.wraps(head)
        def greedy(self: Any, *args: Any, lm_head: Any = None, **kwargs: Any) -> Any:
            _BORROWED.write_once("lm_head", _BORROWED.whose(lm_head),
                                 "the draft step's head (_greedy_sample_from_vocab_"
                                 "parallel_head(lm_head=...))")
            return head(self, *args, lm_head=lm_head, **kwargs)

        greedy._harness_recorded = True  # type: ignore[attr-defined]
        cls._greedy_sample_from_vocab_parallel_head = greedy
    resolve = getattr(module, "_resolve_dflash_embedding_module", None)
    if resolve is not None and not getattr(resolve, "_harness_recorded", False):
        seen: set[str] = set()

        @functools.wraps(resolve)
        def resolved(draft_model: Any, target_model: Any) -> Any:
            embedding = resolve(draft_model, target_model)
            whose = "target" if embedding is target_model.get_input_embeddings() else "draft"
            if whose not in seen:
                seen.add(whose)
                _write("embeddings", whose, "_resolve_dflash_embedding_module")
                _observe_block(embedding, whose)
            return embedding

        resolved._harness_recorded = True  # type: ignore[attr-defined]
        module._resolve_dflash_embedding_module = resolved


def _observe_block(embedding: Any, whose: str) -> None:
    """Record, once each, the block size and mask id of the draft blocks embedded through
    this module: a [requests, block] tensor of ids (the target's own lookups are 1-D)."""
    seen: set[tuple[str, int]] = set()

    def hook(_module: Any, args: tuple[Any, ...], _output: Any) -> None:
        ids = args[0] if args else None
        if getattr(ids, "dim", None) is None or ids.dim() != 2 or ids.shape[1] < 2:
            return
        where = f"the draft block embedded ({whose} embed_module(block_ids))"
        for clause, value in (("block_size", int(ids.shape[1])),
                              *(("mask_token_id", int(v))
                                for v in ids[:, 1:].unique().tolist())):
            if (clause, value) not in seen:
                seen.add((clause, value))
                _write(clause, value, where)

    for module in (embedding, getattr(embedding, "base_layer", None)):
        if module is not None and hasattr(module, "register_forward_hook") \
                and not getattr(module, "_harness_block_observed", False):
            module._harness_block_observed = True
            module.register_forward_hook(hook)
            return


def _draft_forward_given(draft: Any, input_ids: Any, forward_batch: Any,
                         input_embeds: Any) -> None:
    """Record what one draft forward was given: its block of ids, its own block size and
    whose embedding made its input_embeds (each distinct value once)."""
    mode = getattr(getattr(forward_batch, "forward_mode", None), "name", None)
    if mode is not None and mode != "TARGET_VERIFY":  # the worker's draft block only
        return
    given = "the draft forward's"
    own = getattr(draft, "block_size", None)
    if isinstance(own, int):
        _BORROWED.write_once("block_size", own, f"{given} own block_size (set_block_size)")
    requests = getattr(forward_batch, "batch_size", None)
    if getattr(input_ids, "dim", None) is not None and isinstance(requests, int) \
            and requests > 0 and input_ids.numel() % requests == 0:
        block = input_ids.reshape(requests, -1)
        where = f"{given} block (forward_batch.input_ids, [requests, block])"
        _BORROWED.write_once("block_size", int(block.shape[1]), where)
        for value in block[:, 1:].unique().tolist():
            _BORROWED.write_once("mask_token_id", int(value), where)
    if input_embeds is None:
        if getattr(draft, "embed_tokens", None) is not None:
            _BORROWED.write_once("embeddings", "draft",
                                 f"{given} own embed_tokens (no input_embeds given)")
        return
    whose = _BORROWED.embedding_of(input_embeds)
    _BORROWED.write_once("embeddings", whose,
                         f"{given} input_embeds (the output of that embedding module)")


def install_draft(module: Any) -> None:
    """Record, once, the width of the target hidden states that reached the draft's fc,
    and what each draft forward was given."""
    cls = getattr(module, "DFlashDraftModel", None)
    forward = getattr(cls, "forward", None)
    if forward is not None and not getattr(forward, "_harness_recorded", False):
        @functools.wraps(forward)
        def observed(self: Any, input_ids: Any, positions: Any, forward_batch: Any,
                     input_embeds: Any = None, *args: Any, **kwargs: Any) -> Any:
            _draft_forward_given(self, input_ids, forward_batch, input_embeds)
            return forward(self, input_ids, positions, forward_batch, input_embeds,
                           *args, **kwargs)

        observed._harness_recorded = True  # type: ignore[attr-defined]
        cls.forward = observed  # type: ignore[union-attr]
    original = getattr(cls, "project_target_hidden", None)
    if original is None or getattr(original, "_harness_recorded", False):
        return
    done: list[bool] = []

    @functools.wraps(original)
    def project_target_hidden(self: Any, target_hidden: Any) -> Any:
        if not done:
            done.append(True)
            _write("fc_input_width", int(target_hidden.shape[-1]),
                   "project_target_hidden (target hidden states received)")
        return original(self, target_hidden)

    project_target_hidden._harness_recorded = True  # type: ignore[attr-defined]
    cls.project_target_hidden = project_target_hidden


def install_capture(module: Any) -> None:
    """Once the target model's capture is configured, observe its captures at forward time
    (or, where the release cannot be observed so, record the configured list)."""
    configure = getattr(module, "configure_aux_hidden_state_capture", None)
    if configure is None or getattr(configure, "_harness_recorded", False):
        return

    @functools.wraps(configure)
    def configured(*args: Any, **kwargs: Any) -> Any:
        result = configure(*args, **kwargs)
        if kwargs.get("dflash_use_aux_hidden_state"):
            holder = _capture_holder(kwargs.get("model"))
            if holder is not None and not _observe_captures(holder):
                _write("taps", sorted({int(v) for v in holder.layers_to_capture}),
                       "target layers_to_capture (configured: this release's capture "
                       "is not observable)")
        return result

    configured._harness_recorded = True  # type: ignore[attr-defined]
    module.configure_aux_hidden_state_capture = configured
