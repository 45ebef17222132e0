"""What reached the DFlash draft at run time, recorded for the harness (test-only).

With `HARNESS_CONTRACT_RECORD` naming a file, `sitecustomize.py` installs this when
SGLang's DFLASH worker module is imported. Nothing SGLang does is changed: its own objects
are read after its own code has run, and one JSON line per clause is appended:

- after `DFlashWorkerV2.__init__`: the block size the worker runs with (`block_size`), the
  mask token and its id (`_mask_token`, `_mask_token_id`), the draft's decoder layers and
  the width its `fc` projects from, and whose `lm_head` the draft uses;
- after the model runner's `configure_aux_hidden_state_capture`: the target layers the
  target's forward loop captures (its model's `layers_to_capture`: hidden_states[c] for
  each capture index c, the harness's stated convention);
- from `_resolve_dflash_embedding_module` (0.5.19+): whose embeddings it returned;
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


def _captured(model: Any) -> list[int] | None:
    """The capture list the target's forward loop reads (on the model or its inner one)."""
    for holder in (getattr(model, "model", None), getattr(model, "language_model", None),
                   model):
        value = getattr(holder, "layers_to_capture", None) if holder is not None else None
        if value:
            return sorted({int(v) for v in value})
    return None


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
            return embedding

        resolved._harness_recorded = True  # type: ignore[attr-defined]
        module._resolve_dflash_embedding_module = resolved


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
    """Record the capture list the target model was given, once it was configured."""
    configure = getattr(module, "configure_aux_hidden_state_capture", None)
    if configure is None or getattr(configure, "_harness_recorded", False):
        return

    @functools.wraps(configure)
    def configured(*args: Any, **kwargs: Any) -> Any:
        result = configure(*args, **kwargs)
        if kwargs.get("dflash_use_aux_hidden_state"):
            captured = _captured(kwargs.get("model"))
            if captured is not None:
                _write("taps", captured, "target layers_to_capture")
        return result

    configured._harness_recorded = True  # type: ignore[attr-defined]
    module.configure_aux_hidden_state_capture = configured
