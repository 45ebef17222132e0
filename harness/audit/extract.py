"""Compile a few functions (or one class) out of SGLang source text, without importing SGLang.

SGLang's DFlash resolver (`_get_dflash_layer_attention_params` in `sglang/srt/models/dflash.py`
and the helpers it calls there and in `sglang/srt/speculative/dflash_utils.py`) is pure logic
inside modules that import torch and CUDA kernels. So the files are parsed with `ast`, only the
wanted functions and the module-level functions and literal constants they reach are compiled,
and they run in a namespace holding an `AttentionType` enum shaped like SGLang's
(`sglang.srt.layers.radix_attention.AttentionType`, of which the resolver only names two
members). The same is done for a config class SGLang registers for a `model_type`.

Stdlib only: this module also runs inside the transformers environment (audit/worker.py).
"""

from __future__ import annotations
import __future__

import ast
import builtins
import copy
import dataclasses
import enum
import itertools
import logging
import numbers
import sys
import types
import typing
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

DFLASH_MODEL = "sglang/srt/models/dflash.py"
DFLASH_UTILS = "sglang/srt/speculative/dflash_utils.py"
RESOLVER_FILES: tuple[str, ...] = (DFLASH_MODEL, DFLASH_UTILS)
ENTRY_POINT = "_get_dflash_layer_attention_params"
# Extracted when present; only the entry point is required (0.5.17 has no attention-type helper).
# SGLang's HF config parser (`get_config`'s "hf" parser) and the module its helpers live in.
LOADER_FILE = "sglang/srt/utils/hf_transformers/config.py"
LOADER_COMMON = "sglang/srt/utils/hf_transformers/common.py"
LOADER_CLASS, LOADER_METHOD = "HfModelConfigParser", "parse"
RESOLVER_ROOTS: tuple[str, ...] = (
    ENTRY_POINT,
    "_get_dflash_attention_type",
    "get_dflash_layer_types",
    "get_dflash_attention_sliding_window_size",
)


class ExtractError(Exception):
    """The source has no such function or class, or it does not parse or compile."""


class AttentionType(enum.Enum):
    """Shaped like `sglang.srt.layers.radix_attention.AttentionType` (the members used here)."""

    DECODER = "decoder"
    ENCODER_ONLY = "encoder_only"


_MODULES = itertools.count()


def base_namespace(name: str) -> dict[str, object]:
    """Names SGLang's modules import that extracted code may use: the dict of a fresh
    module registered in sys.modules (a dataclass looks its module up there)."""
    module = types.ModuleType(f"{name}_{next(_MODULES)}")
    sys.modules[module.__name__] = module
    namespace: dict[str, object] = module.__dict__
    namespace.update({
        "__builtins__": builtins,
        "AttentionType": AttentionType,
        "Sequence": Sequence,
        "Mapping": Mapping,
        "Iterable": Iterable,
        "Integral": numbers.Integral,
        "logger": logging.getLogger(name),
        "logging": logging,
        "dataclass": dataclasses.dataclass,
        "field": dataclasses.field,
    })
    for alias in ("Any", "Optional", "Tuple", "List", "Dict", "Union", "ClassVar"):
        namespace[alias] = getattr(typing, alias)
    return namespace


def _names_used(node: ast.AST) -> set[str]:
    """Names a definition reads, annotations left out: they stay strings (the code is
    compiled with `from __future__ import annotations`) and name torch or msgspec types."""
    names: set[str] = set()
    pending: list[ast.AST] = [node]
    while pending:
        item = pending.pop()
        if isinstance(item, ast.Name):
            names.add(item.id)
        for child_name, child in ast.iter_fields(item):
            if child_name in ("annotation", "returns"):
                continue
            if isinstance(child, ast.AST):
                pending.append(child)
            elif isinstance(child, list):
                pending.extend(c for c in child if isinstance(c, ast.AST))
    return names


def _literal_constants(tree: ast.Module) -> dict[str, ast.stmt]:
    """Module-level `NAME = literal` (or annotated) assignments a helper may read."""
    constants: dict[str, ast.stmt] = {}
    for node in tree.body:
        target, value = None, None
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        if isinstance(target, ast.Name) and value is not None and _literal(value):
            constants[target.id] = node
    return constants


_LITERAL_CALLS = frozenset({"frozenset", "set", "tuple", "list", "dict"})


def _literal(value: ast.expr) -> bool:
    """A literal, or a builtin collection made from one (`frozenset({"a", "b"})`)."""
    if (isinstance(value, ast.Call) and isinstance(value.func, ast.Name)
            and value.func.id in _LITERAL_CALLS and not value.keywords
            and len(value.args) <= 1):
        return all(_literal(arg) for arg in value.args)
    try:
        ast.literal_eval(value)
    except (ValueError, TypeError, SyntaxError, RecursionError):
        return False
    return True


def parse(text: str, path: str) -> ast.Module:
    try:
        return ast.parse(text, filename=path)
    except SyntaxError as error:
        raise ExtractError(f"cannot parse {path}: {error}") from error


def _compile(body: list[ast.stmt], label: str, namespace: dict[str, object]) -> None:
    module = ast.Module(body=body, type_ignores=[])
    try:
        # Annotations stay strings: they name torch types that do not exist here.
        code = compile(module, f"<{label}>", "exec",
                       flags=__future__.annotations.compiler_flag, dont_inherit=True)  # fmt: skip
        exec(code, namespace)
    except Exception as error:
        raise ExtractError(f"cannot evaluate {label}: {type(error).__name__}: {error}") from error


def extract_functions(
    files: Mapping[str, str], roots: Sequence[str], required: str, label: str
) -> tuple[dict[str, object], tuple[str, ...]]:
    """(namespace, names) with `roots` and every module-level function, class (such as
    `DFlashDraftConfig`, a dataclass) and literal constant they reach compiled.

    Files are searched in order: where two define a name, the first file's one is used.
    """
    definitions: dict[str, ast.FunctionDef | ast.ClassDef] = {}
    constants: dict[str, ast.stmt] = {}
    for path, text in files.items():
        tree = parse(text, path)
        for node in tree.body:
            if isinstance(node, ast.FunctionDef | ast.ClassDef):
                definitions.setdefault(node.name, node)
        for name, node in _literal_constants(tree).items():
            constants.setdefault(name, node)
    if required not in definitions:
        raise ExtractError(f"{' and '.join(files)} define no {required}")
    wanted: list[str] = []
    pending = [name for name in roots if name in definitions]
    while pending:
        name = pending.pop()
        if name not in wanted:
            wanted.append(name)
            pending.extend(n for n in _names_used(definitions[name]) if n in definitions)
    used = set().union(*(_names_used(definitions[name]) for name in wanted))
    body: list[ast.stmt] = [constants[n] for n in sorted(constants) if n in used]
    ordered = tuple(name for name in definitions if name in wanted)
    for name in ordered:
        node = copy.deepcopy(definitions[name])
        # caching decorators come from modules we do not load; a dataclass stays one
        node.decorator_list = [d for d in node.decorator_list if _is_dataclass_decorator(d)]
        body.append(node)
    namespace = base_namespace("harness_sglang_resolver")
    _compile(body, f"{label} resolver", namespace)
    return namespace, ordered


def _is_dataclass_decorator(node: ast.expr) -> bool:
    target = node.func if isinstance(node, ast.Call) else node
    return isinstance(target, ast.Name) and target.id == "dataclass"


def transformers_imports(text: str, path: str) -> dict[str, str]:
    """{name: module} for each `from transformers... import name` of a module: the names
    a config class compiled out of it may need (its base class, such as Qwen3Config)."""
    found: dict[str, str] = {}
    for node in parse(text, path).body:
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("transformers"):
            for alias in node.names:
                found[alias.asname or alias.name] = f"{node.module}:{alias.name}"
    return found


def extract_class(text: str, path: str, class_name: str, base: Any,
                  names: Mapping[str, object] | None = None) -> type:
    """A config class compiled from its module, with the base `PretrainedConfig` given.

    Its module-level helper functions and literal constants come along; the module's own
    imports do not (they are what pulls in torch), so a class that needs them fails here.
    """
    tree = parse(text, path)
    node = next(
        (n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == class_name), None
    )
    if node is None:
        raise ExtractError(f"{path} defines no class {class_name}")
    functions = {n.name: n for n in tree.body
                 if isinstance(n, ast.FunctionDef | ast.ClassDef) and n is not node}
    constants = _literal_constants(tree)
    definitions: dict[str, ast.stmt] = {**functions, **constants}
    reached = set(_names_reached(node, definitions))
    # In the module's own order: a class body may name a class defined above it (a
    # config's `sub_configs`), and a constant one above it.
    body = [copy.deepcopy(statement) for statement in tree.body
            if any(definitions.get(name) is statement for name in reached)]
    for statement in body:
        if isinstance(statement, ast.ClassDef | ast.FunctionDef):
            statement.decorator_list = []
    class_node = copy.deepcopy(node)
    class_node.decorator_list = []
    namespace = base_namespace(f"harness_sglang_config.{class_name}")
    for alias in ("PretrainedConfig", "PreTrainedConfig"):
        namespace[alias] = base
    namespace.update({"math": __import__("math"), "copy": copy})
    namespace.update(names or {})
    _compile([*body, class_node], f"{path}:{class_name}", namespace)
    return typing.cast(type, namespace[class_name])


def _names_reached(start: ast.AST, definitions: Mapping[str, ast.AST]) -> list[str]:
    """Every name `start` uses, directly or through the definitions it reaches, in the
    order found (what must be compiled with it)."""
    reached: list[str] = []
    pending = sorted(_names_used(start))
    while pending:
        name = pending.pop()
        if name in reached:
            continue
        reached.append(name)
        if name in definitions:
            pending.extend(_names_used(definitions[name]))
    return reached


def _assignments(tree: ast.Module) -> dict[str, ast.stmt]:
    """Every module-level `NAME = ...` (tried one by one when compiled; failures skipped)."""
    found: dict[str, ast.stmt] = {}
    for node in tree.body:
        target = None
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target = node.target
        if isinstance(target, ast.Name):
            found[target.id] = node
    return found


def _placeholder(name: str) -> type:
    """A class nothing is an instance of: for a config class the loader only tests against
    (`isinstance(config, DeepseekV41Config)`) whose module needs torch."""
    return type(name, (), {"__doc__": "never matches: its SGLang module is not loaded"})


def extract_loader(files: Mapping[str, str], base: Any, auto_config: Any,
                   registry: Mapping[str, object],
                   imported: Mapping[str, object] | None = None) -> Any:
    """SGLang's own `HfModelConfigParser.parse`, compiled with the helpers it reaches.

    `registry` stands for SGLang's `_CONFIG_REGISTRY` (model_type -> its config class) for
    the draft's model_type; class names the loader only tests against are placeholders;
    `imported` gives names its modules import from modules already loaded (SGLang's patches).
    Returns `parse(model, trust_remote_code, revision=None)`.
    """
    trees = {path: parse(text, path) for path, text in files.items()}
    method = None
    for node in trees.get(LOADER_FILE, ast.Module(body=[], type_ignores=[])).body:
        if isinstance(node, ast.ClassDef) and node.name == LOADER_CLASS:
            method = next((n for n in node.body
                           if isinstance(n, ast.FunctionDef) and n.name == LOADER_METHOD), None)
    if method is None:
        raise ExtractError(f"{LOADER_FILE} defines no {LOADER_CLASS}.{LOADER_METHOD}")
    functions: dict[str, ast.FunctionDef] = {}
    assignments: dict[str, ast.stmt] = {}
    for tree in trees.values():  # the parser's own file first, then common.py
        for node in tree.body:
            if isinstance(node, ast.FunctionDef):
                functions.setdefault(node.name, node)
        for name, node in _assignments(tree).items():
            assignments.setdefault(name, node)
    entry = copy.deepcopy(method)
    entry.name, entry.decorator_list = "_sglang_hf_parse", []
    reached = _names_reached(entry, {**assignments, **functions})
    wanted = [name for name in reached if name in functions]
    used = set(reached)
    namespace = base_namespace("harness_sglang_loader")
    namespace.update({"PretrainedConfig": base, "PreTrainedConfig": base,
                      "AutoConfig": auto_config, "_CONFIG_REGISTRY": dict(registry),
                      "copy": copy, "Path": __import__("pathlib").Path})  # fmt: skip
    for name, value in (imported or {}).items():
        if name in used:
            namespace.setdefault(name, value)
    todo = [name for name in sorted(used) if name in assignments and name not in namespace]
    for _ in range(3):  # a constant may be built from another: retry those that failed
        failed = []
        for name in todo:
            try:
                _compile([copy.deepcopy(assignments[name])], f"{LOADER_FILE}:{name}", namespace)
            except ExtractError:
                failed.append(name)  # built from modules we do not load: unused for drafts
        todo = failed
    body: list[ast.stmt] = []
    for name in wanted:
        node = copy.deepcopy(functions[name])
        node.decorator_list = []
        body.append(node)
    _compile([*body, entry], f"{LOADER_CLASS}.{LOADER_METHOD}", namespace)
    for name in used:
        if name not in namespace and name[:1].isupper() and not hasattr(builtins, name):
            namespace[name] = _placeholder(name)
    function = namespace["_sglang_hf_parse"]
    if not callable(function):  # compiled just above from the parser's own source
        raise ExtractError(f"{LOADER_CLASS}.{LOADER_METHOD} did not compile to a function")
    return lambda model, trust_remote_code, revision=None: function(
        None, model, trust_remote_code=trust_remote_code, revision=revision
    )


def find_method(files: Mapping[str, str], class_name: str,
                method: str) -> tuple[ast.FunctionDef, str] | None:
    """(the method, the file it is in) as `class_name` defines it, or as the nearest base
    class found in `files` does (SGLang's model classes inherit across modules)."""
    classes: dict[str, ast.ClassDef] = {}
    where: dict[str, str] = {}
    for path, text in files.items():
        for node in parse(text, path).body:
            if isinstance(node, ast.ClassDef) and node.name not in classes:
                classes[node.name], where[node.name] = node, path
    pending, seen = [class_name], set()
    while pending:
        name = pending.pop(0)
        if name in seen or name not in classes:
            continue
        seen.add(name)
        for item in classes[name].body:
            if isinstance(item, ast.FunctionDef) and item.name == method:
                return item, where[name]
        pending.extend(base.id for base in classes[name].bases if isinstance(base, ast.Name))
    return None


def class_bases(text: str, path: str, class_name: str) -> list[str]:
    """The names of a class's bases as its module spells them (to find their files)."""
    for node in parse(text, path).body:
        if isinstance(node, ast.ClassDef) and node.name == class_name:
            return [base.id for base in node.bases if isinstance(base, ast.Name)]
    return []


def compile_function(node: ast.FunctionDef, label: str, namespace: dict[str, object]) -> Any:
    """A method compiled as a plain function (its decorators dropped) in `namespace`; the
    caller passes a stand-in for `self`."""
    function = copy.deepcopy(node)
    function.decorator_list = []
    _compile([function], label, namespace)
    return namespace[function.name]


def _stored_names(statement: ast.stmt) -> set[str]:
    """Names a statement assigns, in its own scope (not inside comprehensions or nested
    functions, whose names do not leak)."""
    stored: set[str] = set()
    pending: list[ast.AST] = [statement]
    while pending:
        node = pending.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef
                      | ast.ListComp | ast.SetComp | ast.DictComp | ast.GeneratorExp):
            continue
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            stored.add(node.id)
        pending.extend(ast.iter_child_nodes(node))
    return stored


def method_slice(node: ast.FunctionDef, wanted: Sequence[str], label: str,
                 namespace: dict[str, object]) -> Any:
    """The statements of a method's body that compute `wanted`, as a function with the
    method's own parameters returning {name: value}.

    A backward slice over the body's top-level statements: a statement is kept when it
    assigns a name needed later, and the names it reads become needed. So a resolver that
    lives inside a torch module's `__init__` (`DFlashDraftModel.__init__` sizing `fc`)
    runs as the release wrote it, without building the module.
    """
    parameters = {arg.arg for arg in (*node.args.posonlyargs, *node.args.args,
                                      *node.args.kwonlyargs)}
    needed = set(wanted)
    kept: list[ast.stmt] = []
    for statement in reversed(node.body):
        stored = _stored_names(statement)
        if stored & needed:
            kept.append(statement)
            needed |= {n.id for n in ast.walk(statement)
                       if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)} - parameters
    missing = [name for name in wanted if not any(name in _stored_names(s) for s in kept)]
    if missing:
        raise ExtractError(f"{label} assigns no {', '.join(missing)}")
    result = ast.Return(value=ast.Dict(
        keys=[ast.Constant(value=name) for name in wanted],
        values=[ast.Name(id=name, ctx=ast.Load()) for name in wanted]))
    function = copy.deepcopy(node)  # its parameters, as the release declares them
    function.name, function.decorator_list, function.returns = f"_slice_{node.name}", [], None
    function.body = [*copy.deepcopy(list(reversed(kept))), result]
    ast.fix_missing_locations(function)
    _compile([function], label, namespace)
    return namespace[function.name]


def default_argument(node: ast.FunctionDef, call: str, keyword: str) -> Any:
    """The literal a method passes as `keyword=` to `call(...)` (e.g. the block size
    `DFlashDraftModel.__init__` falls back to: `resolve_block_size(default=16)`)."""
    for item in ast.walk(node):
        if isinstance(item, ast.Call):
            name = item.func.attr if isinstance(item.func, ast.Attribute) else \
                getattr(item.func, "id", None)
            if name == call:
                for key in item.keywords:
                    if key.arg == keyword:
                        try:
                            return ast.literal_eval(key.value)
                        except ValueError:
                            return None
    return None
