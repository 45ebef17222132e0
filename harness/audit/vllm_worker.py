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
from collections.abc import Callable, Mapping
from typing import Any, TypedDict

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


class BadRequest(Exception):
    """The request on stdin is not what audit/vllm.py sends: a field missing or of another
    type (said with the field's place in the request)."""


class Registered(TypedDict):
    """vLLM's own config class for a draft's model_type (audit/vllm.py `_registered`)."""

    name: str
    path: str
    text: str


class Draft(TypedDict):
    """One draft (audit/vllm.py `installed_column`)."""

    dir: str
    target_layers: int | None
    registered: Registered | None


class Request(TypedDict):
    """What audit/vllm.py writes on the worker's stdin (`_columns`)."""

    files: dict[str, str]  # path -> the text of vLLM's module
    drafts: list[Draft]


Function = Callable[..., Any]  # vLLM's function, compiled from its source: untyped
Config = Any  # the config object vLLM's EAGLEConfig builds: untyped


def _object(value: object, where: str) -> Mapping[str, object]:
    if not isinstance(value, dict):
        raise BadRequest(f"{where}: expected a JSON object, got {type(value).__name__}")
    return value


def _field(message: Mapping[str, object], key: str, where: str) -> object:
    if key not in message:
        raise BadRequest(f"{where}: no {key!r}")
    return message[key]


def _text(value: object, where: str) -> str:
    if not isinstance(value, str):
        raise BadRequest(f"{where}: expected a string, got {type(value).__name__}")
    return value


def _registered(value: object, where: str) -> Registered | None:
    if not value:  # as the worker has read it: absent, null or empty is none
        return None
    spec = _object(value, where)
    return {"name": _text(_field(spec, "name", where), f"{where}.name"),
            "path": _text(_field(spec, "path", where), f"{where}.path"),
            "text": _text(_field(spec, "text", where), f"{where}.text")}


def _draft(value: object, where: str) -> Draft:
    draft = _object(value, where)
    layers = draft.get("target_layers")
    if layers is not None and (isinstance(layers, bool) or not isinstance(layers, int)):
        raise BadRequest(f"{where}.target_layers: expected an integer or null, got "
                         f"{type(layers).__name__}")
    return {"dir": _text(_field(draft, "dir", where), f"{where}.dir"), "target_layers": layers,
            "registered": _registered(draft.get("registered"), f"{where}.registered")}


def read_request(value: object) -> Request:
    """The request as audit/vllm.py sends it; BadRequest naming the first field that is
    missing or of another type."""
    request = _object(value, "request")
    files = _object(_field(request, "files", "request"), "request.files")
    drafts = _field(request, "drafts", "request")
    if not isinstance(drafts, list):
        raise BadRequest(f"request.drafts: expected a JSON list, got {type(drafts).__name__}")
    return {"files": {path: _text(text, f"request.files[{path!r}]")
                      for path, text in files.items()},
            "drafts": [_draft(draft, f"request.drafts[{i}]") for i, draft in enumerate(drafts)]}


def _answer(value: object = None, source: str | None = None, error: BaseException | None = None,
            note: str | None = None, limit: str | None = None) -> dict[str, object]:
    return {"value": value, "source": source, "note": note, "limit": limit,
            "error": None if error is None else {"type": type(error).__name__,
                                                 "message": str(error)}}


def _callable(found: object, where: str) -> Function:
    """A function compiled from vLLM's source, narrowed where it is taken."""
    if not callable(found):
        raise Limit(f"{where}: not a function in this vLLM's source")
    return found


def _function(files: Mapping[str, str], path: str, name: str
              ) -> tuple[Function, dict[str, object]]:
    try:
        namespace, _ = extract.extract_functions({path: files[path]}, (name,), name, "vllm")
    except (KeyError, extract.ExtractError) as error:
        raise Limit(f"cannot compile {path}:{name}: {error}") from None
    return _callable(namespace[name], f"{path}:{name}"), namespace


def _method(files: Mapping[str, str], path: str, cls: str, name: str) -> Function:
    found = extract.find_method({path: files[path]}, cls, name) if path in files else None
    if found is None:
        raise Limit(f"{path} has no {cls}.{name}")
    return _callable(extract.compile_function(found[0], f"{path}:{cls}.{name}",
                                              extract.base_namespace("harness_vllm")),
                     f"{path}:{cls}.{name}")


class Resolver:
    def __init__(self, files: Mapping[str, str]) -> None:
        from transformers import AutoConfig, PretrainedConfig

        self.files = files
        try:
            self.eagle = extract.extract_class(files[EAGLE_CONFIG], EAGLE_CONFIG, "EAGLEConfig",
                                               PretrainedConfig)
        except (KeyError, extract.ExtractError) as error:
            raise Limit(f"cannot compile vLLM's EAGLEConfig: {error}") from None
        init = getattr(self.eagle, "__init__", None)
        if not isinstance(init, types.FunctionType):  # compiled from EAGLEConfig's `def`
            raise Limit("vLLM's EAGLEConfig.__init__ is not a function")
        init.__globals__["AutoConfig"] = AutoConfig
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

    def config(self, folder: str, registered: Registered | None) -> Config:
        """The config vLLM builds (its EAGLEConfig, untyped): its own class for a model_type
        in its registry (`_CONFIG_REGISTRY`, e.g. muse_glimmer_assistant), else
        transformers'; then EAGLEConfig(..., method="dflash")."""
        from transformers import AutoConfig, PretrainedConfig

        if registered:
            names: dict[str, object] = {}
            for name, where in extract.transformers_imports(registered["text"],
                                                            registered["path"]).items():
                module, _, attribute = where.partition(":")
                names[name] = getattr(importlib.import_module(module), attribute)
            try:
                cls = extract.extract_class(registered["text"], registered["path"],
                                            registered["name"], PretrainedConfig, names)
            except extract.ExtractError as error:
                raise Limit(f"cannot compile vLLM's {registered['name']}: {error}") from None
            if not issubclass(cls, PretrainedConfig):  # extract_class compiles it on that base
                raise Limit(f"vLLM's {registered['name']} is not a PretrainedConfig")
            hf = cls.from_pretrained(folder)
        else:
            hf = AutoConfig.from_pretrained(folder, trust_remote_code=False)
        return self.eagle(hf, method="dflash", model_type="eagle")

    def attention(self, config: Config) -> dict[str, object]:
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

    def _spec(self, config: Config) -> types.SimpleNamespace:
        return types.SimpleNamespace(draft_model_config=types.SimpleNamespace(hf_config=config))

    def taps(self, config: Config, target_layers: int | None) -> dict[str, object]:
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

    def fc(self, config: Config) -> dict[str, object]:
        vllm_config = types.SimpleNamespace(speculative_config=self._spec(config))
        return _answer(int(self.fc_size(vllm_config)))

    def mask_id(self, config: Config) -> dict[str, object]:
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


def evaluate(resolver: Resolver, draft: Draft) -> dict[str, object]:
    try:
        config = resolver.config(draft["dir"], draft["registered"])
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
    calls: tuple[tuple[str, Callable[[], dict[str, object]]], ...] = (
        ("taps", lambda: resolver.taps(config, draft["target_layers"])),
        ("fc_input_width", lambda: resolver.fc(config)),
        ("mask_token_id", lambda: resolver.mask_id(config)),
        ("draft_layers", lambda: _answer(int(config.num_hidden_layers), "num_hidden_layers")))
    for name, call in calls:
        try:
            clauses[name] = call()
        except Limit as limit:
            clauses[name] = _answer(limit=str(limit))
        except Exception as error:
            clauses[name] = _answer(error=error)
    answer["contract"] = clauses
    return answer


def main() -> int:
    try:
        request = read_request(json.load(sys.stdin))
    except json.JSONDecodeError as error:
        print(f"vLLM's audit worker's request on stdin is not JSON: {error}", file=sys.stderr)
        return 2
    except BadRequest as error:
        print(f"vLLM's audit worker's request on stdin: {error}", file=sys.stderr)
        return 2
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
