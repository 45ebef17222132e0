"""Runs inside a transformers environment (beside worker.py): the draft's other clauses as
one SGLang version's own code resolves them, on the config object that version built.

Each clause is answered by the code SGLang runs for it, compiled out of the version's files
(audit/extract.py), never re-implemented:

- `DFlashDraftConfig` / `parse_dflash_draft_config` (speculative/dflash_utils.py): draft
  layer count (`require_num_layers`), block size (`resolve_block_size`), mask token and id.
- `DFlashDraftModel.__init__` (models/dflash.py): the statements that size `fc` (the taps it
  resolves against the draft's `num_target_layers`, and their count), run as a slice of
  the method; the block size it falls back to (`resolve_block_size(default=...)`).
- `_resolve_dflash_aux_hidden_state` (model_executor/.../spec_aux_hidden_state.py): the
  taps the model runner resolves against the runtime target's layer count (and, from
  0.5.19, `_map_muse_target_layer_ids`), then the target class's own
  `set_dflash_layers_to_capture`, whose `layers_to_capture` is what the target's forward
  loop reads: "capture before layer c", the stream entering decoder layer c.
- `_resolve_mask_token_id` and `_resolve_dflash_embedding_module` (speculative/
  dflash_worker_v2.py), with the target's tokenizer when the audit is given one.

Stated convention for taps: hidden_states[c], numbered as transformers' output_hidden_states
(hidden_states[0] the embeddings' output, hidden_states[c] the output of decoder layer c - 1).
SGLang's and vLLM's capture index c is that number; a DFlash checkpoint's
`target_layer_ids` L names the output of layer L, i.e. hidden_states[L + 1].

Where a value came from is asked of the version too: the key is removed from
`dflash_config`, then from the top level, and the version's parser is run again; the first
removal that changes the answer names the source. What raises is returned as data.

Stdlib + transformers only; never imports the harness's other modules or torch.
"""

from __future__ import annotations

import ast
import copy
import inspect
import logging
import sys
import traceback
import types
from collections.abc import Callable, Mapping
from typing import Any

if __package__:
    from harness.audit import extract
else:  # loaded by path from worker.py, as extract.py is
    extract = sys.modules["harness_audit_extract"]

DFLASH_MODEL = "sglang/srt/models/dflash.py"
DFLASH_UTILS = "sglang/srt/speculative/dflash_utils.py"
SPEC_AUX = "sglang/srt/model_executor/model_runner_components/spec_aux_hidden_state.py"
DFLASH_WORKER = "sglang/srt/speculative/dflash_worker_v2.py"
CAPTURE_SETUP = "sglang/srt/model_executor/model_runner_components/attention_backend_setup.py"
CONTRACT_FILES: tuple[str, ...] = (SPEC_AUX, DFLASH_WORKER, CAPTURE_SETUP)
PARSER = "parse_dflash_draft_config"
CONFIG_ROOTS = (PARSER, "DFlashDraftConfig", "build_target_layer_ids",
                "is_nemotron_35_draft_config", "DEFAULT_DFLASH_MASK_TOKEN")
FC_SIZING = ("target_layer_ids", "num_context_features")
DRAFT_CLASS = "DFlashDraftModel"
WORKER_CLASSES = ("DFlashWorkerV2", "DFlashWorker")

# What SGLang's parser reads for each clause, as (key in dflash_config, top-level key).
SOURCES = {
    "block_size": "block_size",
    "mask_token": "mask_token",
    "mask_token_id": "mask_token_id",
    "taps": "target_layer_ids",
    "num_target_layers": "num_target_layers",
}


class Limit(Exception):
    """Something the audit cannot reproduce for one clause (a stand-in the code outgrew)."""


def error_message(error: BaseException) -> str:
    """The error's own message; for a bare `assert` (no message), the place it failed and
    the condition it checks, read from the engine's source where its text was loaded."""
    message = str(error)
    if message or not isinstance(error, AssertionError) or error.__traceback__ is None:
        return message
    frame = traceback.extract_tb(error.__traceback__)[-1]
    name = frame.filename
    if name.startswith("<sglang ") and name.endswith(">"):  # worker._module's file names
        name = name[len("<sglang "):-1].replace(".", "/") + ".py"
    condition = (frame.line or "").strip()
    return (f"{condition} failed" if condition.startswith("assert") else "an assert failed") \
        + f" ({name}:{frame.lineno})"


def _function(namespace: Mapping[str, object], name: str) -> Callable[..., object]:
    """A function the engine's source defines, compiled into `namespace`."""
    found = namespace[name]
    if not callable(found):
        raise Limit(f"{name}: not a function in this version's source")
    return found


def _error(error: BaseException) -> dict[str, str]:
    return {"type": type(error).__name__, "message": error_message(error)}


def _answer(value: Any = None, source: str | None = None, error: BaseException | None = None,
            note: str | None = None, limit: str | None = None) -> dict[str, object]:
    return {"value": value, "source": source, "note": note,
            "error": None if error is None else _error(error), "limit": limit}


def _without(config: Any, key: str, where: str) -> Any:
    """A copy of the config object without `key` in its dflash_config or at its top level."""
    other = copy.deepcopy(config)
    if where == "dflash_config":
        nested = getattr(other, "dflash_config", None)
        if isinstance(nested, dict) and key in nested:
            nested.pop(key)
            return other
        return None
    removed = False
    for holder in (other, getattr(other, "text_config", None)):
        if holder is not None and key in getattr(holder, "__dict__", {}):
            delattr(holder, key)
            removed = True
    return other if removed else None


def _changed(config: Any, key: str, where: str) -> Any:
    """A copy of the config object with a declared string or integer `key` given another
    value of its type; None where it is not declared there (or is of another type)."""
    other = copy.deepcopy(config)
    holders = [getattr(other, "dflash_config", None)] if where == "dflash_config" else [
        getattr(other, "__dict__", None),
        getattr(getattr(other, "text_config", None), "__dict__", None)]
    changed = False
    for holder in holders:
        if not isinstance(holder, dict) or key not in holder:
            continue
        value = holder[key]
        if isinstance(value, str):
            holder[key] = value + "\u2060probe"
        elif isinstance(value, int) and not isinstance(value, bool):
            holder[key] = value + 1
        else:
            continue
        changed = True
    return other if changed else None


def source_of(read: Callable[[Any], Any], config: Any, key: str) -> str | None:
    """Where the version read `key`: the first removal that changes its answer, else (a
    declared value equal to the engine's default) the first place where another value
    would change it."""
    value = read(config)
    for edit in (_without, _changed):
        for where in ("dflash_config", "top level"):
            other = edit(config, key, where)
            if other is None:
                continue
            try:
                if read(other) != value:
                    return where
            except Exception:
                return where  # editing it makes the version refuse: it was read from here
    return None


def _stand_in_module(name: str, **names: Any) -> None:
    module = types.ModuleType(name)
    module.__dict__.update(names)
    sys.modules[name] = module


class _DraftModelConfig:
    """Stands in for SGLang's ModelConfig where the model runner builds the draft's: its
    `hf_config` is the config object this version built for the draft."""

    draft_config: Any = None

    @classmethod
    def from_server_args(cls, server_args: Any, model_path: Any = None, **_: Any) -> Any:
        config = cls.draft_config
        text = getattr(config, "text_config", None) or config
        return types.SimpleNamespace(hf_config=config, hf_text_config=text)


def _text(config: Any) -> Any:
    get = getattr(config, "get_text_config", None)
    try:
        return get() if callable(get) else config
    except TypeError:
        return config


class Resolver:
    """One version's clauses for one draft (and its target, when the audit has one)."""

    def __init__(self, job: Mapping[str, Any], label: str) -> None:  # JSON: the job
        self.job, self.label = job, label
        files = dict(job["files"])
        try:
            self.utils, _ = extract.extract_functions(
                {DFLASH_UTILS: files[DFLASH_UTILS]}, CONFIG_ROOTS, PARSER, label)
        except extract.ExtractError as error:
            raise Limit(f"cannot compile {DFLASH_UTILS}'s {PARSER}: {error}") from None
        self.parse = _function(self.utils, PARSER)
        self.model_text = files[DFLASH_MODEL]
        self.contract_files = dict(job.get("contract_files") or {})

    # --- the draft's own clauses (DFlashDraftConfig) -------------------------------------

    def _parsed(self, config: Any) -> Any:
        return self.parse(draft_hf_config=config)

    def resolve(self, config: Any, target: Any | None, target_arch: str | None,
                tokenizer: Any | None) -> dict[str, object]:
        try:
            parsed = self._parsed(config)
        except Exception as error:  # the version refuses the draft's DFlash fields
            refused = _answer(error=error)
            refusals: dict[str, object] = {
                name: dict(refused) for name in
                ("draft_layers", "block_size", "mask_token", "mask_token_id",
                 "fc_input_width", "taps", "embeddings", "lm_head")}
            return refusals
        answers: dict[str, object] = {
            "draft_layers": self._draft_layers(parsed),
            "block_size": self._block_size(config, parsed),
            "mask_token": self._mask_token(config, parsed),
            "mask_token_id": self._mask_token_id(config, parsed, target, tokenizer),
        }
        answers["fc_input_width"], fc_taps = self._fc(config)
        answers["taps"] = self._taps(config, parsed, target, target_arch, fc_taps)
        answers["embeddings"] = self._embeddings(config)
        answers["lm_head"] = self._lm_head()
        return answers

    def _draft_layers(self, parsed: Any) -> dict[str, object]:
        try:
            return _answer(parsed.require_num_layers(), "num_hidden_layers")
        except Exception as error:
            return _answer(error=error)

    def _block_size(self, config: Any, parsed: Any) -> dict[str, object]:
        def read(other: Any) -> Any:
            return self._parsed(other).resolve_block_size(default=None)

        value = parsed.resolve_block_size(default=None)
        if value is not None:
            return _answer(value, source_of(read, config, "block_size"))
        init = self._draft_init()
        default = None if init is None else extract.default_argument(
            init, "resolve_block_size", "default")
        return _answer(default, "engine default",
                       note=f"{DFLASH_MODEL} {DRAFT_CLASS}.__init__ resolve_block_size"
                            f"(default={default!r}); the server's "
                            "--speculative-num-draft-tokens, when given, wins")

    def _mask_token(self, config: Any, parsed: Any) -> dict[str, object]:
        def read(other: Any) -> Any:
            return self._parsed(other).mask_token

        source = source_of(read, config, "mask_token")
        return _answer(parsed.mask_token, source or "engine default",
                       note=None if source else "DEFAULT_DFLASH_MASK_TOKEN")

    def _mask_token_id(self, config: Any, parsed: Any, target: Any | None,
                       tokenizer: Any | None) -> dict[str, object]:
        def read(other: Any) -> Any:
            return self._parsed(other).mask_token_id

        declared = parsed.mask_token_id
        source = source_of(read, config, "mask_token_id") if declared is not None else None
        if tokenizer is None or target is None:
            if declared is not None:
                return _answer(declared, source)
            return _answer(None, "tokenizer",
                           note=f"resolved at load from the target's tokenizer "
                                f"({parsed.mask_token!r}); the audit was given no tokenizer")
        method = self._worker_method("_resolve_mask_token_id")
        if method is None:
            return _answer(declared, source, limit="this version's DFLASH worker has no "
                                                   "_resolve_mask_token_id")
        vocab = getattr(_text(target), "vocab_size", None) or getattr(target, "vocab_size", 0)
        worker = types.SimpleNamespace(target_worker=types.SimpleNamespace(
            tokenizer=tokenizer,
            model_runner=types.SimpleNamespace(model_config=types.SimpleNamespace(
                vocab_size=int(vocab or 0)))))
        worker._target_worker = worker.target_worker
        worker.ps = types.SimpleNamespace(tp_rank=1)  # 0.5.17's rank (not the logging one)
        try:
            resolved = method(worker, mask_token=parsed.mask_token, mask_token_id=declared)
        except Exception as error:
            return _answer(error=error)
        return _answer(int(resolved), source or "tokenizer",
                       note=None if source else "resolved from the target's tokenizer")

    # --- fc and the taps ------------------------------------------------------------------

    def _draft_init(self) -> ast.FunctionDef | None:
        found = extract.find_method({DFLASH_MODEL: self.model_text}, DRAFT_CLASS, "__init__")
        return None if found is None else found[0]

    def _fc(self, config: Any) -> tuple[dict[str, object], list[int] | None]:
        init = self._draft_init()
        if init is None:
            return _answer(limit=f"{DFLASH_MODEL} has no {DRAFT_CLASS}.__init__"), None
        namespace = dict(self.utils)
        try:
            sized = extract.method_slice(init, FC_SIZING, f"{DRAFT_CLASS}.__init__",
                                         namespace)
        except extract.ExtractError as error:
            return _answer(limit=f"cannot slice how {DRAFT_CLASS} sizes fc: {error}"), None
        try:
            found = sized(types.SimpleNamespace(), config)
        except NameError as error:
            return _answer(limit=f"sizing fc needs {error.name!r}, which the audit does "
                                 "not load"), None
        except Exception as error:
            return _answer(error=error), None
        hidden = getattr(_text(config), "hidden_size", None)
        taps = [int(i) for i in found["target_layer_ids"]]
        if hidden is None:
            return _answer(limit="the draft config has no hidden_size"), taps
        width = int(found["num_context_features"]) * int(hidden)
        return _answer(width, note=f"{found['num_context_features']} features x hidden_size "
                                   f"{hidden}; taps as the draft sizes fc: {taps}"), taps

    def _taps(self, config: Any, parsed: Any, target: Any | None, arch: str | None,
              fc_taps: list[int] | None) -> dict[str, object]:
        def read(other: Any) -> Any:
            return self._parsed(other).target_layer_ids

        declared = parsed.target_layer_ids
        source = source_of(read, config, "target_layer_ids") if declared is not None \
            else "fallback formula"
        if target is None or not arch:
            note = "no target given: which layers the target captures is not resolved"
            if fc_taps is not None:
                note += f"; the draft's fc reads {fc_taps} (layer-output ids)"
            return _answer(None, source, note=note)
        try:
            ids = self._runner_taps(config, target)
        except Limit as limit:
            return _answer(None, source, limit=str(limit))
        except Exception as error:
            return _answer(error=error)
        try:
            captured = self._captured(ids, target, arch)
        except Limit as limit:
            return _answer(None, source, limit=str(limit), note=f"model runner ids {ids}")
        except Exception as error:
            return _answer(error=error)
        note = f"model runner resolves {ids}; {arch}.set_dflash_layers_to_capture sets " \
               f"layers_to_capture {captured}"
        return _answer(sorted(set(captured)), source, note=note)

    def _runner_taps(self, config: Any, target: Any) -> list[int]:
        text = self.contract_files.get(SPEC_AUX)
        if text is None:
            raise Limit(f"this version has no {SPEC_AUX}")
        try:
            namespace, _ = extract.extract_functions(
                {SPEC_AUX: text}, ("_resolve_dflash_aux_hidden_state",),
                "_resolve_dflash_aux_hidden_state", self.label)
        except extract.ExtractError as error:
            raise Limit(f"cannot compile the model runner's tap resolution: {error}") from None
        _DraftModelConfig.draft_config = config
        spec = types.SimpleNamespace(speculative_draft_model_path="draft",
                                     speculative_draft_model_revision=None)
        namespace.update({
            "ModelConfig": _DraftModelConfig, "get_spec": lambda: spec,
            "is_deepseek_v4": lambda *_: False, "logger": logging.getLogger("sglang.audit"),
        })
        _stand_in_module("sglang.srt.speculative.dflash_utils", **self.utils)
        algorithm = types.SimpleNamespace(is_dflash_family=lambda: True, is_dspark=lambda: False,
                                          is_dflash=lambda: True)
        result = types.SimpleNamespace()
        model_config = types.SimpleNamespace(hf_config=target, hf_text_config=_text(target))
        server_args = types.SimpleNamespace(speculative_draft_model_path="draft",
                                            speculative_draft_model_revision=None)
        try:
            _function(namespace, "_resolve_dflash_aux_hidden_state")(
                config=result, server_args=server_args, model_config=model_config,
                spec_algorithm=algorithm, is_draft_worker=False)
        except Exception as error:
            # What runs after the taps are set (0.5.19+: sizing the draft's KV pool from
            # torch dtypes) is not the taps' business; a failure before them is.
            if getattr(result, "dflash_target_layer_ids", None) is None:
                if isinstance(error, NameError | AttributeError | ImportError):
                    raise Limit(f"the model runner's tap resolution needs {error}, which "
                                "the audit does not stand in for") from None
                raise
        return [int(i) for i in result.dflash_target_layer_ids]

    def _captured(self, ids: list[int], target: Any, arch: str) -> list[int]:
        """What the target's forward loop will read: the model runner's own
        `configure_aux_hidden_state_capture` (attention_backend_setup.py) on the target
        class, whose `set_dflash_layers_to_capture` is the release's own method. A class
        that hands the ids on to its inner model (`self.model.set_dflash_layers_to_capture`)
        has what it hands on recorded: the inner models store the list as given."""
        files = dict(self.job.get("target_model") or {})
        if not files:
            raise Limit(f"this version defines no class {arch}")
        found = extract.find_method(files, arch, "set_dflash_layers_to_capture")
        attributes: dict[str, object] = {}
        if found is not None:
            node, path = found
            namespace = extract.base_namespace("harness_sglang_target")
            attributes["set_dflash_layers_to_capture"] = extract.compile_function(
                node, f"{path}:{arch}", namespace)
        layers = int(getattr(_text(target), "num_hidden_layers", 0) or 0)
        inner = types.SimpleNamespace(layers=[types.SimpleNamespace() for _ in range(layers)],
                                      layers_to_capture=[], start_layer=0, end_layer=layers)
        inner.set_dflash_layers_to_capture = lambda given: setattr(
            inner, "layers_to_capture", list(given))
        model = type(arch, (), attributes)()
        model.__dict__.update(model=inner, language_model=inner, config=target,
                              pp_group=types.SimpleNamespace(is_last_rank=True,
                                                             is_first_rank=True))
        setup = self._capture_setup()
        try:
            if setup is not None:
                setup(model=model, eagle_use_aux_hidden_state=False,
                      eagle_aux_hidden_state_layer_ids=None, dflash_use_aux_hidden_state=True,
                      dflash_target_layer_ids=list(ids), is_dspark=False)
            elif found is not None:
                _function(attributes, "set_dflash_layers_to_capture")(model, list(ids))
            else:
                raise Limit(f"{arch} has no set_dflash_layers_to_capture and this version "
                            f"has no {CAPTURE_SETUP} to say what that means")
        except (NameError, AttributeError) as error:
            raise Limit(f"{arch}.set_dflash_layers_to_capture needs {error}, which the audit "
                        "does not stand in for") from None
        captured = inner.layers_to_capture or model.__dict__.get("layers_to_capture")
        if not captured:
            raise Limit(f"{arch}.set_dflash_layers_to_capture set no layers_to_capture")
        return [int(i) for i in captured]

    def _capture_setup(self) -> Any:
        text = self.contract_files.get(CAPTURE_SETUP)
        if text is None:
            return None
        try:
            namespace, _ = extract.extract_functions(
                {CAPTURE_SETUP: text}, ("configure_aux_hidden_state_capture",),
                "configure_aux_hidden_state_capture", self.label)
        except extract.ExtractError:
            return None
        function = _function(namespace, "configure_aux_hidden_state_capture")
        accepted = set(inspect.signature(function).parameters)
        return lambda **given: function(**{k: v for k, v in given.items() if k in accepted})

    # --- what the draft borrows from the target -------------------------------------------

    def _worker_tree(self) -> ast.Module | None:
        text = self.contract_files.get(DFLASH_WORKER)
        return None if text is None else extract.parse(text, DFLASH_WORKER)

    def _worker_method(self, name: str) -> Any:
        text = self.contract_files.get(DFLASH_WORKER)
        if text is None:
            return None
        for cls in WORKER_CLASSES:
            found = extract.find_method({DFLASH_WORKER: text}, cls, name)
            if found is not None:
                namespace = extract.base_namespace("harness_sglang_worker")
                namespace["get_parallel"] = lambda: types.SimpleNamespace(tp_rank=1)
                namespace["get_tensor_model_parallel_rank"] = lambda: 1
                return extract.compile_function(found[0], f"{DFLASH_WORKER}:{name}", namespace)
        return None

    def _embeddings(self, config: Any) -> dict[str, object]:
        text = self.contract_files.get(DFLASH_WORKER)
        if text is None:
            return _answer(limit=f"this version has no {DFLASH_WORKER}")
        try:
            namespace, _ = extract.extract_functions(
                {DFLASH_WORKER: text}, ("_resolve_dflash_embedding_module",),
                "_resolve_dflash_embedding_module", self.label)
        except extract.ExtractError:
            namespace = None
        if namespace is not None:
            is_own = self.utils.get("is_nemotron_35_draft_config")
            own = bool(is_own(config)) if callable(is_own) else False
            draft = types.SimpleNamespace(is_nemotron_35_draft=own,
                                          get_input_embeddings=lambda: "draft")
            target = types.SimpleNamespace(get_input_embeddings=lambda: "target")
            try:
                chosen = _function(namespace, "_resolve_dflash_embedding_module")(draft, target)
            except Exception as error:
                return _answer(error=error)
            return _answer(chosen, "_resolve_dflash_embedding_module")
        if _reads(self._worker_tree(), "target", "get_input_embeddings"):
            return _answer("target", "the DFLASH worker reads the target's embeddings")
        return _answer(limit="cannot tell where this version's DFLASH worker embeds tokens")

    def _lm_head(self) -> dict[str, object]:
        tree = self._worker_tree()
        if tree is None:
            return _answer(limit=f"this version has no {DFLASH_WORKER}")
        if _reads(tree, "target", "lm_head"):
            return _answer("target", "the DFLASH worker reads the target's lm_head")
        return _answer(limit="cannot tell which lm_head this version's DFLASH worker uses")


def _reads(tree: ast.Module | None, owner: str, attribute: str) -> bool:
    """Whether the code reads `attribute` of something named like `owner` (an attribute
    chain such as `target_model.lm_head`, or `getattr(target_model, "lm_head", ...)`)."""
    if tree is None:
        return False
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and node.attr == attribute
                and owner in ast.unparse(node.value)):
            return True
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id == "getattr" and len(node.args) >= 2
                and isinstance(node.args[1], ast.Constant) and node.args[1].value == attribute
                and owner in ast.unparse(node.args[0])):
            return True
    return False
