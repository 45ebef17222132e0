"""Run one SGLang version's own DFlash resolver on a draft config, without importing SGLang.

The resolver (`_get_dflash_layer_attention_params` in `sglang/srt/models/dflash.py` and
the helpers it calls, in that file and in `sglang/srt/speculative/dflash_utils.py`) is
pure logic inside modules that import torch and CUDA kernels. So the two files are parsed
with `ast`, only the resolver functions and the module-level functions they reach are
compiled, and they run in a namespace of stand-ins: an `AttentionType` enum and a config
object that behaves like `transformers.PretrainedConfig` for the attributes they read.
"""

from __future__ import annotations
import __future__

import ast
import builtins
import copy
import enum
import logging
import numbers
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.attention import (
    BEHAVIOURS,
    Behaviour,
    LayerAttention,
    read_fields,
    resolve_layers,
)
from harness.audit.source import DFLASH_MODEL, RESOLVER_FILES, SGLangSource
from harness.errors import BadInput

ENTRY_POINT = "_get_dflash_layer_attention_params"
# Extracted when present; only the entry point is required (0.5.17 has no attention-type helper).
RESOLVER_ROOTS: tuple[str, ...] = (
    ENTRY_POINT,
    "_get_dflash_attention_type",
    "get_dflash_layer_types",
    "get_dflash_attention_sliding_window_size",
)


class ResolverError(BadInput):
    """A version's resolver could not be extracted or evaluated; names version and file."""


class AttentionType(enum.Enum):
    """Stand-in for `sglang.srt.layers.radix_attention.AttentionType`."""

    DECODER = "decoder"
    ENCODER_ONLY = "encoder_only"


class PretrainedConfigStandIn:
    """Behaves like `transformers.PretrainedConfig` for what the resolvers read.

    Keys become attributes (a missing one raises AttributeError, so `getattr(c, k, d)`
    works); a nested `text_config` becomes a stand-in too, as transformers builds
    sub-configs; `get_text_config()` returns it, or the config itself when there is none.
    """

    def __init__(self, data: Mapping[str, Any]) -> None:
        for key, value in data.items():
            if key == "text_config" and isinstance(value, Mapping):
                value = PretrainedConfigStandIn(value)
            setattr(self, key, copy.deepcopy(value))

    def get_text_config(self, decoder: bool | None = None, encoder: bool | None = None) -> Any:
        return getattr(self, "text_config", None) or self

    def to_dict(self) -> dict[str, Any]:
        return {
            key: value.to_dict() if isinstance(value, PretrainedConfigStandIn) else value
            for key, value in vars(self).items()
        }


def _stub_namespace() -> dict[str, Any]:
    """Names the resolver modules import that the extracted functions may use."""
    namespace: dict[str, Any] = {
        "__builtins__": builtins,
        "__name__": "harness_sglang_resolver",
        "AttentionType": AttentionType,
        "Sequence": Sequence,
        "Mapping": Mapping,
        "Integral": numbers.Integral,
        "logger": logging.getLogger("harness.audit.sglang_resolver"),
        "logging": logging,
    }
    for name in ("Any", "Optional", "Tuple", "List", "Dict", "Union", "Iterable"):
        namespace[name] = getattr(typing, name)
    return namespace


@dataclass(frozen=True)
class ExtractedResolver:
    """The compiled resolver of one version: call `layer(config, index)`."""

    source: SGLangSource
    functions: tuple[str, ...]  # names extracted, in definition order
    namespace: dict[str, Any]

    def layer(self, config: Any, index: int) -> tuple[int, Any]:
        return self.namespace[ENTRY_POINT](config, index)


def _module_functions(tree: ast.Module) -> dict[str, ast.FunctionDef]:
    return {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}


def _module_constants(tree: ast.Module) -> dict[str, ast.Assign]:
    """Module-level `NAME = literal` assignments a helper may read."""
    constants = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name):
                try:
                    ast.literal_eval(node.value)
                except ValueError:
                    continue
                constants[target.id] = node
    return constants


def _names_used(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _parse(source: SGLangSource, path: str) -> ast.Module:
    try:
        return ast.parse(source.files[path], filename=path)
    except SyntaxError as error:
        raise ResolverError(f"{source.label}: cannot parse {path}: {error}") from error


def extract_resolver(source: SGLangSource) -> ExtractedResolver:
    """Compile the version's resolver functions and the helpers they reach, nothing else."""
    # dflash.py first: where both files define a name, the model file's own one is used.
    functions: dict[str, tuple[str, ast.FunctionDef]] = {}
    constants: dict[str, ast.Assign] = {}
    for path in RESOLVER_FILES:
        tree = _parse(source, path)
        for name, node in _module_functions(tree).items():
            functions.setdefault(name, (path, node))
        for name, node in _module_constants(tree).items():
            constants.setdefault(name, node)
    if ENTRY_POINT not in functions:
        raise ResolverError(
            f"{source.label}: {DFLASH_MODEL} defines no {ENTRY_POINT}; "
            f"this version's DFlash resolver cannot be found (read from {source.origin})"
        )

    wanted: list[str] = []
    pending = [name for name in RESOLVER_ROOTS if name in functions]
    while pending:
        name = pending.pop()
        if name in wanted:
            continue
        wanted.append(name)
        pending.extend(n for n in _names_used(functions[name][1]) if n in functions)

    body: list[ast.stmt] = [
        constants[n] for n in sorted(constants) if _used_by(n, wanted, functions)
    ]
    ordered = [name for name in functions if name in wanted]
    for name in ordered:
        node = copy.deepcopy(functions[name][1])
        node.decorator_list = []  # caching decorators come from modules we do not load
        body.append(node)
    module = ast.Module(body=body, type_ignores=[])
    namespace = _stub_namespace()
    try:
        # Annotations stay strings: they name torch types that do not exist here.
        code = compile(module, f"<{source.label} resolver>", "exec",
                       flags=__future__.annotations.compiler_flag, dont_inherit=True)  # fmt: skip
        exec(code, namespace)
    except Exception as error:
        raise ResolverError(
            f"{source.label}: cannot evaluate the DFlash resolver from "
            f"{' and '.join(RESOLVER_FILES)}: {type(error).__name__}: {error}"
        ) from error
    return ExtractedResolver(source, tuple(ordered), namespace)


def _used_by(
    constant: str, wanted: list[str], functions: Mapping[str, tuple[str, ast.FunctionDef]]
) -> bool:
    return any(constant in _names_used(functions[name][1]) for name in wanted)


def _call_resolver(resolver: ExtractedResolver, config: Mapping[str, Any]) -> list[tuple[int, Any]]:
    fields = read_fields(config)
    stand_in = PretrainedConfigStandIn(config)
    results = []
    for index in range(fields.num_layers):
        try:
            results.append(resolver.layer(stand_in, index))
        except Exception as error:
            raise ResolverError(
                f"{resolver.source.label}: {ENTRY_POINT} (from {DFLASH_MODEL}) failed on "
                f"layer {index}: {type(error).__name__}: {error}"
            ) from error
    return results


def _to_layers(
    resolver: ExtractedResolver, config: Mapping[str, Any], raw: list[tuple[int, Any]]
) -> list[tuple[int | None, bool]]:
    layers = []
    for index, result in enumerate(raw):
        try:
            window_left, attention_type = result
        except (TypeError, ValueError) as error:
            raise ResolverError(
                f"{resolver.source.label}: {ENTRY_POINT} returned {result!r} for layer {index}, "
                "expected (window, AttentionType)"
            ) from error
        if attention_type not in (AttentionType.DECODER, AttentionType.ENCODER_ONLY):
            raise ResolverError(
                f"{resolver.source.label}: {ENTRY_POINT} returned attention type "
                f"{attention_type!r} for layer {index}"
            )
        # SGLang stores window_left = sliding_window - 1 (HF windows include the token itself).
        window = None if window_left is None or window_left < 0 else int(window_left) + 1
        layers.append((window, attention_type is AttentionType.DECODER))
    return layers


def _with_is_causal(config: Mapping[str, Any], value: bool) -> dict[str, Any]:
    """A copy with is_causal set where SGLang reads it: the text config."""
    patched = dict(config)
    nested = patched.get("text_config")
    if isinstance(nested, Mapping):
        patched["text_config"] = {**nested, "is_causal": value}
    else:
        patched["is_causal"] = value
    return patched


def evaluate(resolver: ExtractedResolver, config: Mapping[str, Any]) -> list[LayerAttention]:
    """Per-layer attention of a draft config under this version's own resolver.

    `explicit` is found by asking the version itself: a layer's causality is explicit when
    the config declares is_causal and flipping that declaration flips the layer.
    """
    fields = read_fields(config)
    layers = _to_layers(resolver, config, _call_resolver(resolver, config))
    flipped: list[tuple[int | None, bool]] | None = None
    if fields.is_causal is not None:
        other = _with_is_causal(config, not fields.is_causal)
        flipped = _to_layers(resolver, other, _call_resolver(resolver, other))
    types = fields.layer_types
    return [
        LayerAttention(
            index=index,
            layer_type=types[index] if types is not None else None,
            window=window,
            causal=causal,
            explicit=flipped is not None and flipped[index][1] != causal,
        )
        for index, (window, causal) in enumerate(layers)
    ]


# Probe drafts that tell the three behaviours apart: each layer type, is_causal unset/true/false.
_PROBES: tuple[dict[str, Any], ...] = (
    *(
        {
            "num_hidden_layers": 2,
            "layer_types": ["sliding_attention", "full_attention"],
            "sliding_window": 8,
            **({} if is_causal is None else {"is_causal": is_causal}),
        }
        for is_causal in (None, True, False)
    ),
    {"num_hidden_layers": 2},
)


def matching_behaviours(resolver: ExtractedResolver) -> list[Behaviour]:
    """The known behaviours this version reproduces on every probe draft (normally one)."""
    matches: list[Behaviour] = []
    for behaviour in BEHAVIOURS:
        if all(evaluate(resolver, probe) == resolve_layers(probe, behaviour) for probe in _PROBES):
            matches.append(behaviour)
    return matches


def accepts_plain_dict(resolver: ExtractedResolver, config: Mapping[str, Any]) -> bool:
    """Whether the version's resolver also works on a plain dict (the fixed one does not)."""
    call: Callable[[Any, int], Any] = resolver.layer
    try:
        for index in range(read_fields(config).num_layers):
            call(dict(config), index)
    except Exception:
        return False
    return True
