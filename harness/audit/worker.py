"""Runs inside a transformers environment: build the draft config as SGLang does, run resolvers.

`python -I worker.py` reads one JSON request on stdin and writes one JSON answer on stdout.
All jobs of a request share one SGLang `hf_transformers_patches` text (the parent groups them
so), because those patches change transformers process-wide, as `import sglang` does.

Per job (one SGLang version or commit):
1. apply that SGLang's transformers patches (`sglang/srt/utils/hf_transformers_patches.py`,
   `apply_all()`, which `sglang/__init__.py` runs at import);
2. build the config the way SGLang's HF config parser does for a draft folder:
   `AutoConfig.from_pretrained(folder, trust_remote_code=False)`, or, when that SGLang
   registers its own config class for the draft's `model_type`, that class's
   `from_pretrained(folder)`;
3. call the version's `_get_dflash_layer_attention_params(config, i)` for
   `i in range(int(config.num_hidden_layers))`, as its `DFlashDraftModel.__init__` does.
Whatever SGLang's or transformers' code raises is returned as data, never hidden.

Stdlib + transformers only; never imports the harness's other modules or torch.
"""

from __future__ import annotations

import copy
import importlib.machinery
import json
import linecache
import logging
import os
import sys
import types
from collections.abc import Mapping
from typing import Any

if __package__:  # imported as harness.audit.worker (tests)
    from harness.audit import clauses, extract
else:  # a script in the environment: load extract.py and clauses.py by path (their
    # folder's names would shadow modules transformers imports, such as `bisect`, if it
    # were put on sys.path)
    import importlib.util

    def _by_path(name: str, file: str) -> types.ModuleType:
        spec = importlib.util.spec_from_file_location(
            name, os.path.join(os.path.dirname(os.path.abspath(__file__)), file))
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        return module

    extract = _by_path("harness_audit_extract", "extract.py")
    clauses = _by_path("harness_audit_clauses", "clauses.py")

PATCHES_MODULE = "sglang.srt.utils.hf_transformers_patches"


def _error(stage: str, error: BaseException, **extra: Any) -> dict[str, object]:
    return {"stage": stage, "type": type(error).__name__,
            "message": clauses.error_message(error), **extra}


def _module(name: str, text: str | None = None, package: bool = False) -> types.ModuleType:
    module = types.ModuleType(name)
    if package:
        module.__path__ = []  # a namespace with no files: its __init__ (torch) never runs
    sys.modules[name] = module
    if text is not None:
        module.__file__ = f"<sglang {name}>"
        # its text where tracebacks look for it: a bare assert's condition is shown
        linecache.cache[module.__file__] = (len(text), None, text.splitlines(True),
                                            module.__file__)
        exec(compile(text, module.__file__, "exec"), module.__dict__)
    return module


class _PlaceholderModules:
    """Any other `sglang.*` module the config parser imports inside a branch (for example
    `from sglang.srt.configs.mamba import MambaConfig`, only to test `isinstance`): a module
    whose class names are classes nothing is an instance of. Its real file imports torch."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if not name.startswith("sglang.") or name in sys.modules:
            return None
        return importlib.machinery.ModuleSpec(name, self, is_package=True)

    def create_module(self, spec: Any) -> types.ModuleType:
        module = types.ModuleType(spec.name)
        module.__path__ = []

        def placeholder(attribute: str) -> Any:
            if attribute[:1].isupper():
                value = type(attribute, (), {"__module__": spec.name})
                setattr(module, attribute, value)
                return value
            raise AttributeError(f"{spec.name}.{attribute} is not loaded by the audit")

        module.__getattr__ = placeholder  # type: ignore[attr-defined]
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        return None


def apply_patches(patches: Mapping[str, str | None]) -> None:
    """Run SGLang's own `apply_all()` with just enough of the `sglang` package around it."""
    _module("sglang", package=True)
    _module("sglang.srt", package=True)
    utils = _module("sglang.srt.utils", package=True)
    utils.logger = logging.getLogger("sglang.srt.utils")  # type: ignore[attr-defined]
    # The one environ flag the patches read (`SGLANG_IS_IN_CI`, for a tokenizer patch) as a
    # production server has it; the real environ.py imports CUDA debugging helpers.
    environ = _module("sglang.srt.environ")
    environ.envs = types.SimpleNamespace(  # type: ignore[attr-defined]
        SGLANG_IS_IN_CI=types.SimpleNamespace(get=lambda: False))
    if patches.get("patches"):
        _module(PATCHES_MODULE, patches["patches"]).apply_all()
    sys.meta_path.append(_PlaceholderModules())  # after the patches: they import for real


def _text_config(config: Any) -> Any:
    get = getattr(config, "get_text_config", None)
    return get() if callable(get) else config


def _layer_types(config: Any) -> list[Any] | None:
    for holder in (_text_config(config), config):
        value = getattr(holder, "layer_types", None)
        if value is not None:
            return list(value) if not isinstance(value, str) else None
    return None


def _resolve(entry: Any, config: Any) -> list[tuple[Any, str]]:
    """SGLang's loop: one call per draft layer on the same config object."""
    results = []
    for index in range(int(config.num_hidden_layers)):
        try:
            window_left, attention_type = entry(config, index)
        except Exception as error:
            error.add_note(f"layer {index}")
            raise
        name = getattr(attention_type, "name", repr(attention_type))
        results.append((None if window_left is None else int(window_left), name))
    return results


def _load(job: Mapping[str, object], folder: str, spec: Any = None) -> tuple[Any, str]:
    """(config, how it was built): SGLang's own HF config parser when the version has one.
    `spec`: the config class the version registers for this folder's model_type."""
    from transformers import AutoConfig, PretrainedConfig

    registry: dict[str, object] = {}
    if spec:
        try:
            cls = extract.extract_class(spec["text"], spec["path"], spec["name"], PretrainedConfig)
        except extract.ExtractError as error:
            raise _HarnessLimit(f"cannot compile {spec['path']}:{spec['name']}, the config "
                                f"class SGLang registers for this model_type: {error}") from None
        registry[spec["model_type"]] = cls
        _register(AutoConfig, spec["model_type"], cls)
    loader = job.get("loader") or {}
    if extract.LOADER_FILE in loader:
        try:
            patches = sys.modules.get(PATCHES_MODULE)
            imported = {k: v for k, v in vars(patches).items() if callable(v)} if patches else {}
            parse = extract.extract_loader(loader, PretrainedConfig, AutoConfig, registry,
                                           imported)
        except extract.ExtractError as error:
            raise _HarnessLimit(f"cannot compile SGLang's config parser: {error}") from None
        try:
            return parse(folder, trust_remote_code=False), "sglang HfModelConfigParser.parse"
        except NameError as error:  # a name from a module the audit does not load
            raise _HarnessLimit(f"SGLang's config parser needs {error.name!r}, which the "
                                "audit does not load") from None
    if spec:
        built = registry[spec["model_type"]].from_pretrained(folder)
        return built, f"{spec['name']}.from_pretrained"
    return AutoConfig.from_pretrained(folder, trust_remote_code=False), "AutoConfig.from_pretrained"


_REGISTERED: set[str] = set()  # model types this process registered (an earlier version's)


def _register(auto_config: Any, model_type: str, cls: type) -> None:
    """As SGLang's common.py does at import: `AutoConfig.register(name, cls)`, where a
    name transformers already owns stays transformers'. A name an earlier version registered
    in this process is replaced: each version sees its own class, as in its own server."""
    try:
        auto_config.register(model_type, cls, exist_ok=model_type in _REGISTERED)
    except ValueError:
        return  # transformers owns the name; SGLang's parse re-parses through its class
    _REGISTERED.add(model_type)


class _HarnessLimit(Exception):
    """Something the audit cannot reproduce (not SGLang's decision)."""


def _evaluate(entry: Any, config: Any) -> dict[str, object]:
    layers = _resolve(entry, config)
    text = _text_config(config)
    is_causal = getattr(text, "is_causal", None)
    flipped = None
    if is_causal is not None:
        other = copy.deepcopy(config)
        _text_config(other).is_causal = not is_causal
        try:
            flipped = _resolve(entry, other)
        except Exception:
            flipped = None  # explicitness unknown; the layers above stand
    return {
        "layers": layers,
        "flipped": flipped,
        "layer_types": _layer_types(config),
        "is_causal": is_causal if isinstance(is_causal, bool) else None,
        "config_class": type(config).__name__,
    }


def _probe(entry: Any, probe: Mapping[str, object]) -> Any:
    from transformers import PretrainedConfig

    try:
        return _resolve(entry, PretrainedConfig(**probe))
    except Exception as error:
        return _error("resolve", error)


def run_job(job: Mapping[str, object], request: Mapping[str, object]) -> dict[str, object]:
    try:
        namespace, _ = extract.extract_functions(
            job["files"], extract.RESOLVER_ROOTS, extract.ENTRY_POINT, job["label"]
        )
    except extract.ExtractError as error:
        return {"error": _error("extract", error)}
    entry = namespace[extract.ENTRY_POINT]
    probes = [_probe(entry, probe) for probe in request.get("probes", [])]
    draft = request["configs"][job["config"]]
    try:
        config, built_by = _load(job, draft["dir"], job.get("config_class"))
    except _HarnessLimit as error:
        return {"error": {"stage": "harness", "type": "AuditLimit", "message": str(error)}}
    except Exception as error:
        return {"error": _error("load", error), "probes": probes}
    try:
        result = _evaluate(entry, config)
    except Exception as error:
        notes = getattr(error, "__notes__", [])
        where = notes[-1] if notes else None
        return {"error": _error("resolve", error, where=where), "probes": probes,
                "config_class": type(config).__name__, "built_by": built_by,
                "contract": _contract(job, config, draft.get("target"))}
    result["probes"] = probes
    result["built_by"] = built_by
    raw = draft.get("raw")
    try:
        if raw is not None:
            for index in range(len(result["layers"])):
                entry(copy.deepcopy(raw), index)
        result["accepts_plain_dict"] = True
    except Exception:
        result["accepts_plain_dict"] = False
    result["error"] = None
    result["contract"] = _contract(job, config, draft.get("target"))
    return result


def _target(job: Mapping[str, object], target: Mapping[str, object] | None
            ) -> tuple[Any, str | None, Any, str | None]:
    """(the target's config object as this version builds it, its architecture, its
    tokenizer or None, why something is missing)."""
    if not target:
        return None, None, None, None
    try:
        config, _ = _load(job, target["dir"], job.get("target_config_class"))
    except Exception as error:
        return None, None, None, f"the target config: {type(error).__name__}: {error}"
    tokenizer = None
    if target.get("tokenizer"):
        try:
            from transformers import AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained(target["dir"])
        except Exception:
            tokenizer = None
    return config, target.get("architecture"), tokenizer, None


def _contract(job: Mapping[str, object], config: Any, target: Mapping[str, object] | None
              ) -> dict[str, object]:
    """Every other clause of the draft's contract, by this version's own code."""
    try:
        resolver = clauses.Resolver(job, job["label"])
    except clauses.Limit as limit:
        return {"limit": str(limit)}
    target_config, arch, tokenizer, problem = _target(job, target)
    answers = resolver.resolve(config, target_config, arch, tokenizer)
    if problem:
        answers["taps"] = {**answers["taps"], "error": {"type": "TargetConfig",
                                                        "message": problem}}
    return answers


def main() -> int:
    request = json.load(sys.stdin)
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    answer: dict[str, object] = {"results": {}}
    try:
        apply_patches(request.get("patches") or {})
    except Exception as error:
        failure = {"error": {"stage": "harness", "type": "AuditLimit",
                             "message": "cannot apply this SGLang's transformers patches "
                                        f"({PATCHES_MODULE}.apply_all): "
                                        f"{type(error).__name__}: {error}"}}
        answer["results"] = {job["id"]: failure for job in request["jobs"]}
    else:
        for job in request["jobs"]:
            answer["results"][job["id"]] = run_job(job, request)
    import transformers

    answer["transformers"] = transformers.__version__
    json.dump(answer, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
