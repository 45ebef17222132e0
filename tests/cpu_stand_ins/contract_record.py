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
  that reached it (`fc_input_width` as delivered).

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


def _after_init(worker: Any) -> None:
    draft = getattr(worker, "draft_model", None)
    runner = getattr(getattr(worker, "target_worker", None), "model_runner", None)
    target = getattr(runner, "model", None)
    where = "DFlashWorkerV2.__init__"
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


def install_draft(module: Any) -> None:
    """Record, once, the width of the target hidden states that reached the draft's fc."""
    cls = getattr(module, "DFlashDraftModel", None)
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
