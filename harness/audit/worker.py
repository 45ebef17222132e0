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
import importlib.abc
import importlib.machinery
import json
import linecache
import logging
import os
import sys
import types
from collections.abc import Callable, Mapping
from typing import Any, TypedDict

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
Config = Any  # the config object the version's code builds (its own class or any): untyped


class BadRequest(Exception):
    """The request on stdin is not what audit/evaluate.py sends: a field missing or of
    another type (said with the field's place in the request)."""


class ConfigClass(TypedDict):
    """The config class a version registers for a model_type (`SGLangSource.config_class`)."""

    path: str
    name: str
    text: str
    model_type: str


class Target(TypedDict):
    """A draft's target checkpoint (`AuditTarget.request`)."""

    dir: str
    architecture: str | None
    tokenizer: bool


class Draft(TypedDict):
    """One draft config the jobs are evaluated on."""

    dir: str
    raw: Any  # JSON from outside: the draft's config.json as its file holds it
    target: Target | None


class Job(TypedDict):
    """One SGLang version's files (`evaluate._job_request`)."""

    id: str
    label: str
    files: dict[str, str]
    config: int  # index into the request's configs
    loader: dict[str, str]
    config_class: ConfigClass | None
    contract_files: dict[str, str]
    target_model: dict[str, str]
    target_config_class: ConfigClass | None


class Request(TypedDict):
    """What audit/evaluate.py writes on the worker's stdin (`evaluate._request`)."""

    configs: list[Draft]
    probes: list[dict[str, Any]]  # JSON: keyword arguments for transformers' PretrainedConfig
    patches: dict[str, str]
    jobs: list[Job]


def _object(value: object, where: str) -> Mapping[str, object]:
    if not isinstance(value, dict):
        raise BadRequest(f"{where}: expected a JSON object, got {type(value).__name__}")
    return value


def _list(value: object, where: str) -> list[object]:
    if not isinstance(value, list):
        raise BadRequest(f"{where}: expected a JSON list, got {type(value).__name__}")
    return value


def _field(message: Mapping[str, object], key: str, where: str) -> object:
    if key not in message:
        raise BadRequest(f"{where}: no {key!r}")
    return message[key]


def _text(value: object, where: str) -> str:
    if not isinstance(value, str):
        raise BadRequest(f"{where}: expected a string, got {type(value).__name__}")
    return value


def _optional_text(value: object, where: str) -> str | None:
    return None if value is None else _text(value, where)


def _texts(value: object, where: str) -> dict[str, str]:
    """{path: text} (None or absent: empty)."""
    if value is None:
        return {}
    return {key: _text(text, f"{where}[{key!r}]")
            for key, text in _object(value, where).items()}


def _config_class(value: object, where: str) -> ConfigClass | None:
    if not value:  # as the worker has read it: absent, null or empty is none
        return None
    spec = _object(value, where)
    return {"path": _text(_field(spec, "path", where), f"{where}.path"),
            "name": _text(_field(spec, "name", where), f"{where}.name"),
            "text": _text(_field(spec, "text", where), f"{where}.text"),
            "model_type": _text(_field(spec, "model_type", where), f"{where}.model_type")}


def _target_of(value: object, where: str) -> Target | None:
    if not value:  # as the worker has read it: absent, null or empty is none
        return None
    target = _object(value, where)
    tokenizer = target.get("tokenizer", False)
    if not isinstance(tokenizer, bool):
        raise BadRequest(f"{where}.tokenizer: expected true or false, got "
                         f"{type(tokenizer).__name__}")
    return {"dir": _text(_field(target, "dir", where), f"{where}.dir"),
            "architecture": _optional_text(target.get("architecture"),
                                           f"{where}.architecture"),
            "tokenizer": tokenizer}


def _draft(value: object, where: str) -> Draft:
    draft = _object(value, where)
    return {"dir": _text(_field(draft, "dir", where), f"{where}.dir"),
            "raw": draft.get("raw"), "target": _target_of(draft.get("target"), f"{where}.target")}


def _job(value: object, where: str, configs: int) -> Job:
    job = _object(value, where)
    config = _field(job, "config", where)
    if isinstance(config, bool) or not isinstance(config, int) or not 0 <= config < configs:
        raise BadRequest(f"{where}.config: expected an index into the {configs} configs, "
                         f"got {config!r}")
    return {"id": _text(_field(job, "id", where), f"{where}.id"),
            "label": _text(_field(job, "label", where), f"{where}.label"),
            "files": _texts(_field(job, "files", where), f"{where}.files"),
            "config": config,
            "loader": _texts(job.get("loader"), f"{where}.loader"),
            "config_class": _config_class(job.get("config_class"), f"{where}.config_class"),
            "contract_files": _texts(job.get("contract_files"), f"{where}.contract_files"),
            "target_model": _texts(job.get("target_model"), f"{where}.target_model"),
            "target_config_class": _config_class(job.get("target_config_class"),
                                                 f"{where}.target_config_class")}


def read_request(value: object) -> Request:
    """The request as audit/evaluate.py sends it; BadRequest naming the first field that
    is missing or of another type."""
    request = _object(value, "request")
    configs = [_draft(draft, f"request.configs[{i}]")
               for i, draft in enumerate(_list(_field(request, "configs", "request"),
                                               "request.configs"))]
    probes = [dict(_object(probe, f"request.probes[{i}]"))
              for i, probe in enumerate(_list(request.get("probes", []), "request.probes"))]
    jobs = [_job(job, f"request.jobs[{i}]", len(configs))
            for i, job in enumerate(_list(_field(request, "jobs", "request"), "request.jobs"))]
    return {"configs": configs, "probes": probes,
            "patches": _texts(request.get("patches"), "request.patches"), "jobs": jobs}


def _error(stage: str, error: BaseException, **extra: object) -> dict[str, object]:
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


class _PlaceholderModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Any other `sglang.*` module the config parser imports inside a branch (for example
    `from sglang.srt.configs.mamba import MambaConfig`, only to test `isinstance`): a module
    whose class names are classes nothing is an instance of. Its real file imports torch."""

    def find_spec(self, name: str, path: object = None, target: object = None
                  ) -> importlib.machinery.ModuleSpec | None:
        if not name.startswith("sglang.") or name in sys.modules:
            return None
        return importlib.machinery.ModuleSpec(name, self, is_package=True)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = types.ModuleType(spec.name)
        module.__path__ = []

        def placeholder(attribute: str) -> type:
            if attribute[:1].isupper():
                value = type(attribute, (), {"__module__": spec.name})
                setattr(module, attribute, value)
                return value
            raise AttributeError(f"{spec.name}.{attribute} is not loaded by the audit")

        vars(module)["__getattr__"] = placeholder  # the module's own attribute hook
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


def _text_config(config: Config) -> Config:
    get = getattr(config, "get_text_config", None)
    return get() if callable(get) else config


def _layer_types(config: Config) -> list[object] | None:
    for holder in (_text_config(config), config):
        value = getattr(holder, "layer_types", None)
        if value is not None:
            return list(value) if not isinstance(value, str) else None
    return None


Entry = Callable[..., Any]  # the engine's function, compiled from its source: untyped


def _resolve(entry: Entry, config: Config) -> list[tuple[int | None, str]]:
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


def _load(job: Job, folder: str, spec: ConfigClass | None = None) -> tuple[Config, str]:
    """(config, how it was built): SGLang's own HF config parser when the version has one.
    `spec`: the config class the version registers for this folder's model_type. The
    config is whatever class the version's code builds (untyped)."""
    from transformers import AutoConfig, PretrainedConfig

    registry: dict[str, type[PretrainedConfig]] = {}
    if spec:
        try:
            cls = extract.extract_class(spec["text"], spec["path"], spec["name"], PretrainedConfig)
        except extract.ExtractError as error:
            raise _HarnessLimit(f"cannot compile {spec['path']}:{spec['name']}, the config "
                                f"class SGLang registers for this model_type: {error}") from None
        if not issubclass(cls, PretrainedConfig):  # extract_class compiles it on that base
            raise _HarnessLimit(f"{spec['path']}:{spec['name']} is not a PretrainedConfig")
        registry[spec["model_type"]] = cls
        _register(AutoConfig.register, spec["model_type"], cls)
    loader = job["loader"]
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


def _register(register: Callable[..., object], model_type: str, cls: type) -> None:
    """As SGLang's common.py does at import: `AutoConfig.register(name, cls)`, where a
    name transformers already owns stays transformers'. A name an earlier version registered
    in this process is replaced: each version sees its own class, as in its own server."""
    try:
        register(model_type, cls, exist_ok=model_type in _REGISTERED)
    except ValueError:
        return  # transformers owns the name; SGLang's parse re-parses through its class
    _REGISTERED.add(model_type)


class _HarnessLimit(Exception):
    """Something the audit cannot reproduce (not SGLang's decision)."""


def _evaluate(entry: Entry, config: Config, layers: list[tuple[int | None, str]]
              ) -> dict[str, object]:
    """The answer for `layers` (SGLang's loop on `config`) and what else the config says."""
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


def _probe(entry: Entry, probe: Mapping[str, Any]) -> object:  # JSON: config keywords
    from transformers import PretrainedConfig

    try:
        return _resolve(entry, PretrainedConfig(**probe))
    except Exception as error:
        return _error("resolve", error)


def run_job(job: Job, request: Request) -> dict[str, object]:
    try:
        namespace, _ = extract.extract_functions(
            job["files"], extract.RESOLVER_ROOTS, extract.ENTRY_POINT, job["label"]
        )
    except extract.ExtractError as error:
        return {"error": _error("extract", error)}
    entry = namespace[extract.ENTRY_POINT]
    if not callable(entry):  # extract_functions compiled it from the version's `def`
        return {"error": {"stage": "extract", "type": "ExtractError",
                          "message": f"{extract.ENTRY_POINT} is not a function"}}
    probes = [_probe(entry, probe) for probe in request["probes"]]
    draft = request["configs"][job["config"]]
    try:
        config, built_by = _load(job, draft["dir"], job["config_class"])
    except _HarnessLimit as error:
        return {"error": {"stage": "harness", "type": "AuditLimit", "message": str(error)}}
    except Exception as error:
        return {"error": _error("load", error), "probes": probes}
    try:
        layers = _resolve(entry, config)
        result = _evaluate(entry, config, layers)
    except Exception as error:
        notes = getattr(error, "__notes__", [])
        where = notes[-1] if notes else None
        return {"error": _error("resolve", error, where=where), "probes": probes,
                "config_class": type(config).__name__, "built_by": built_by,
                "contract": _contract(job, config, draft["target"])}
    result["probes"] = probes
    result["built_by"] = built_by
    raw = draft["raw"]
    try:
        if raw is not None:
            for index in range(len(layers)):
                entry(copy.deepcopy(raw), index)
        result["accepts_plain_dict"] = True
    except Exception:
        result["accepts_plain_dict"] = False
    result["error"] = None
    result["contract"] = _contract(job, config, draft["target"])
    return result


def _target(job: Job, target: Target | None
            ) -> tuple[Config, str | None, object, str | None]:
    """(the target's config object as this version builds it, its architecture, its
    tokenizer or None, why something is missing); the config and tokenizer are whatever
    classes the version's code and transformers build (untyped)."""
    if not target:
        return None, None, None, None
    try:
        config, _ = _load(job, target["dir"], job["target_config_class"])
    except Exception as error:
        return None, None, None, f"the target config: {type(error).__name__}: {error}"
    tokenizer: object = None
    if target["tokenizer"]:
        try:
            from transformers import AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained(target["dir"])
        except Exception:
            tokenizer = None
    return config, target["architecture"], tokenizer, None


def _contract(job: Job, config: Config, target: Target | None) -> dict[str, object]:
    """Every other clause of the draft's contract, by this version's own code."""
    try:
        resolver = clauses.Resolver(job, job["label"])
    except clauses.Limit as limit:
        return {"limit": str(limit)}
    target_config, arch, tokenizer, problem = _target(job, target)
    answers = resolver.resolve(config, target_config, arch, tokenizer)
    taps = answers["taps"]
    if problem and isinstance(taps, Mapping):  # clauses' answer: always a dict
        answers["taps"] = {**taps, "error": {"type": "TargetConfig", "message": problem}}
    return answers


def main() -> int:
    try:
        request = read_request(json.load(sys.stdin))
    except json.JSONDecodeError as error:
        print(f"the audit worker's request on stdin is not JSON: {error}", file=sys.stderr)
        return 2
    except BadRequest as error:
        print(f"the audit worker's request on stdin: {error}", file=sys.stderr)
        return 2
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    results: dict[str, dict[str, object]] = {}
    answer: dict[str, object] = {"results": results}
    try:
        apply_patches(request["patches"])
    except Exception as error:
        failure: dict[str, object] = {"error": {"stage": "harness", "type": "AuditLimit",
                             "message": "cannot apply this SGLang's transformers patches "
                                        f"({PATCHES_MODULE}.apply_all): "
                                        f"{type(error).__name__}: {error}"}}
        results.update({job["id"]: failure for job in request["jobs"]})
    else:
        for job in request["jobs"]:
            results[job["id"]] = run_job(job, request)
    import transformers

    answer["transformers"] = transformers.__version__
    json.dump(answer, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
