"""Runs inside a transformers environment: a DFlash draft's contract by vLLM's own code.

`python -I vllm_worker.py` reads one JSON request on stdin (the vLLM files below, as text,
and the drafts) and writes one JSON answer. The code is vLLM's (its CPU wheel), compiled
out of its modules as the SGLang audit does (extract.py), never re-implemented:

- the config object: transformers builds the draft's config (`AutoConfig.from_pretrained`,
  what vLLM's get_config does for a Hugging Face config), then vLLM's own `EAGLEConfig(
  hf_config, method="dflash")` (transformers_utils/configs/eagle.py), as its
  SpeculativeConfig does for a DFlash draft;
- attention and window per layer: `_resolve_layer_attention` (models/qwen3_dflash.py),
  under the V1 runner (the only one on CPU; it refuses mixed sliding/full drafts) and,
  when V1 refuses, the V2 runner;
- taps: `get_eagle3_aux_layers_from_config` (v1/worker/gpu/spec_decode/eagle/eagle3_utils.py),
  else the target's default (`SupportsEagle3.get_eagle3_default_aux_hidden_state_layers`),
  set on the target model by `EagleModelMixin._set_aux_hidden_state_layers`
  (models/interfaces.py): the capture indices, hidden_states[c];
- fc input width: `_get_dflash_fc_input_size` (models/qwen3_dflash.py);
- mask token id: `SpecDecodeBaseProposer._init_parallel_drafting_params`
  (v1/spec_decode/llm_base_proposer.py);
- draft layers: the config's `num_hidden_layers`, as DFlashQwen3Model builds its layers.

vLLM reads no block size from a DFlash draft (the server's num_speculative_tokens K makes
blocks of K + 1), no mask token text, and decides the draft's embeddings and head from the
checkpoint's weights at load: those clauses are answered as not read, with the reason.

Stdlib + transformers only; never imports the harness's other modules, vLLM or torch.
"""

from __future__ import annotations

import copy
import importlib
import json
import os
import sys
import types
from collections.abc import Mapping
from typing import Any

if __package__:  # imported as harness.audit.vllm_worker (tests)
    from harness.audit import extract
else:  # loaded by path, as worker.py loads it
    import importlib.util

    _spec = importlib.util.spec_from_file_location(
        "harness_audit_extract", os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                              "extract.py"))
    assert _spec is not None and _spec.loader is not None
    extract = importlib.util.module_from_spec(_spec)
    sys.modules[_spec.name] = extract
    _spec.loader.exec_module(extract)

EAGLE_CONFIG = "vllm/transformers_utils/configs/eagle.py"
QWEN3_DFLASH = "vllm/model_executor/models/qwen3_dflash.py"
EAGLE3_UTILS = "vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py"
INTERFACES = "vllm/model_executor/models/interfaces.py"
PROPOSER = "vllm/v1/spec_decode/llm_base_proposer.py"
FILES = (EAGLE_CONFIG, QWEN3_DFLASH, EAGLE3_UTILS, INTERFACES, PROPOSER)


class Limit(Exception):
    pass


def _answer(value: Any = None, source: str | None = None, error: BaseException | None = None,
            note: str | None = None, limit: str | None = None) -> dict[str, object]:
    return {"value": value, "source": source, "note": note, "limit": limit,
            "error": None if error is None else {"type": type(error).__name__,
                                                 "message": str(error)}}


def _function(files: Mapping[str, str], path: str, name: str) -> Any:
    try:
        namespace, _ = extract.extract_functions({path: files[path]}, (name,), name, "vllm")
    except (KeyError, extract.ExtractError) as error:
        raise Limit(f"cannot compile {path}:{name}: {error}") from None
    return namespace[name], namespace


def _method(files: Mapping[str, str], path: str, cls: str, name: str) -> Any:
    found = extract.find_method({path: files[path]}, cls, name) if path in files else None
    if found is None:
        raise Limit(f"{path} has no {cls}.{name}")
    return extract.compile_function(found[0], f"{path}:{cls}.{name}",
                                    extract.base_namespace("harness_vllm"))


class Resolver:
    def __init__(self, files: Mapping[str, str]) -> None:
        from transformers import AutoConfig, PretrainedConfig

        self.files = files
        try:
            self.eagle = extract.extract_class(files[EAGLE_CONFIG], EAGLE_CONFIG, "EAGLEConfig",
                                               PretrainedConfig)
        except (KeyError, extract.ExtractError) as error:
            raise Limit(f"cannot compile vLLM's EAGLEConfig: {error}") from None
        self.eagle.__init__.__globals__["AutoConfig"] = AutoConfig
        self.layer, namespace = _function(files, QWEN3_DFLASH, "_resolve_layer_attention")
        self.runner = types.SimpleNamespace(use_v2_model_runner=False)
        namespace["get_current_vllm_config"] = lambda: self.runner
        self.fc_size, _ = _function(files, QWEN3_DFLASH, "_get_dflash_fc_input_size")
        self.aux, _ = _function(files, EAGLE3_UTILS, "get_eagle3_aux_layers_from_config")
        self.fc_size.__globals__["get_eagle3_aux_layers_from_config"] = self.aux
        self.default_aux = _method(files, INTERFACES, "SupportsEagle3",
                                   "get_eagle3_default_aux_hidden_state_layers")
        self.set_aux = _method(files, INTERFACES, "EagleModelMixin",
                               "_set_aux_hidden_state_layers")
        self.mask = _method(files, PROPOSER, "SpecDecodeBaseProposer",
                            "_init_parallel_drafting_params")

    def config(self, folder: str, registered: Mapping[str, object] | None) -> Any:
        """The config vLLM builds: its own class for a model_type in its registry
        (`_CONFIG_REGISTRY`, e.g. muse_glimmer_assistant), else transformers'; then
        EAGLEConfig(..., method="dflash")."""
        from transformers import AutoConfig, PretrainedConfig

        if registered:
            names = {}
            for name, where in extract.transformers_imports(registered["text"],
                                                            registered["path"]).items():
                module, _, attribute = where.partition(":")
                names[name] = getattr(importlib.import_module(module), attribute)
            try:
                cls = extract.extract_class(registered["text"], registered["path"],
                                            registered["name"], PretrainedConfig, names)
            except extract.ExtractError as error:
                raise Limit(f"cannot compile vLLM's {registered['name']}: {error}") from None
            hf = cls.from_pretrained(folder)
        else:
            hf = AutoConfig.from_pretrained(folder, trust_remote_code=False)
        return self.eagle(hf, method="dflash", model_type="eagle")

    def attention(self, config: Any) -> dict[str, object]:
        layers = int(config.num_hidden_layers)
        note = None
        self.runner.use_v2_model_runner = False
        try:
            rows = [self.layer(config, i) for i in range(layers)]
        except NotImplementedError as refused:  # the V1 runner's refusal; V2 resolves it
            note = f"V1 runner (the only one on CPU) refuses: {refused}; V2 shown"
            self.runner.use_v2_model_runner = True
            rows = [self.layer(config, i) for i in range(layers)]
        explicit = getattr(config, "is_causal", None) is not None or \
            (getattr(config, "dflash_config", None) or {}).get("causal") is not None
        return {"layers": [{"index": i, "window": w, "causal": bool(c)}
                           for i, (w, c) in enumerate(rows)],
                "explicit": explicit, "note": note}

    def _spec(self, config: Any) -> Any:
        return types.SimpleNamespace(draft_model_config=types.SimpleNamespace(hf_config=config))

    def taps(self, config: Any, target_layers: int | None) -> dict[str, object]:
        declared = self.aux(self._spec(config))
        source = "draft config"
        if not declared:
            if not target_layers:
                return _answer(None, "target default",
                               note="no taps in the draft config: vLLM uses the target's "
                                    "default layers; no target given")
            holder = types.SimpleNamespace(layers=[None] * target_layers)
            declared = self.default_aux(types.SimpleNamespace(model=holder))
            source = "target default"
        holder = types.SimpleNamespace(_cache_aux_pp_layout=lambda: None)
        self.set_aux(holder, tuple(declared))
        return _answer(list(holder.aux_hidden_state_layers), source,
                       note=f"aux layers {list(declared)}")

    def fc(self, config: Any) -> dict[str, object]:
        vllm_config = types.SimpleNamespace(speculative_config=self._spec(config))
        return _answer(int(self.fc_size(vllm_config)))

    def mask_id(self, config: Any) -> dict[str, object]:
        proposer = types.SimpleNamespace(draft_model_config=types.SimpleNamespace(
            hf_config=config), pass_hidden_states_to_model=False)
        self.mask(proposer)
        return _answer(int(proposer.parallel_drafting_token_id), "draft config")


NOT_READ = {
    "block_size": "vLLM reads no block size from a DFlash draft: the server's "
                  "num_speculative_tokens K makes blocks of K + 1",
    "mask_token": "vLLM reads the mask token's id, never its text",
    "embeddings": "decided at load from the checkpoint's weights (embed_tokens shipped or not)",
    "lm_head": "decided at load from the checkpoint's weights (lm_head shipped or not)",
}


def evaluate(resolver: Resolver, draft: Mapping[str, object]) -> dict[str, object]:
    try:
        config = resolver.config(draft["dir"], draft.get("registered"))
    except Limit as limit:
        return {"limit": str(limit)}
    except Exception as error:
        return {"error": {"type": type(error).__name__, "message": str(error)}}
    answer: dict[str, object] = {"error": None, "config_class": type(config.model).__name__}
    try:
        answer["attention"] = resolver.attention(config)
    except Exception as error:
        answer["attention"] = {"error": {"type": type(error).__name__, "message": str(error)}}
    clauses: dict[str, object] = {name: _answer(note=note) for name, note in NOT_READ.items()}
    for name, call in (("taps", lambda: resolver.taps(config, draft.get("target_layers"))),
                       ("fc_input_width", lambda: resolver.fc(config)),
                       ("mask_token_id", lambda: resolver.mask_id(config)),
                       ("draft_layers", lambda: _answer(int(config.num_hidden_layers),
                                                        "num_hidden_layers"))):
        try:
            clauses[name] = call()
        except Limit as limit:
            clauses[name] = _answer(limit=str(limit))
        except Exception as error:
            clauses[name] = _answer(error=error)
    answer["contract"] = clauses
    return answer


def main() -> int:
    request = json.load(sys.stdin)
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    try:
        resolver = Resolver(request["files"])
    except Limit as limit:
        json.dump({"limit": str(limit)}, sys.stdout)
        return 0
    json.dump({"results": [evaluate(resolver, copy.deepcopy(d)) for d in request["drafts"]]},
              sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
