"""The draft's whole contract with its engine, beyond per-layer attention: one value per
clause, what the checkpoint declares of it, and how a resolution differs from an expectation.

The clauses (docs/audit.md, "The whole contract"):

- taps: the target hidden states the draft reads, as hidden_states[c] in transformers'
  numbering (hidden_states[0] the embeddings' output, hidden_states[c] decoder layer
  c - 1's output). SGLang's and vLLM's capture index c is that number; a checkpoint's
  `target_layer_ids` entry L is L + 1. In the order the engine concatenates them.
- block_size: tokens per draft block.
- mask_token, mask_token_id: the mask token's text (SGLang) and id.
- draft_layers: draft decoder layers.
- fc_input_width: the width the draft's fc projects from (taps x hidden_size).
- embeddings, lm_head: whose token embeddings and head the draft uses (`target`/`draft`).

Pure and stdlib-only, like harness/suite/attention.py: the suite schema, the audit, the
preflight and the run's judge all read it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TypeGuard

from harness.suite.attention import DraftConfigError

ClauseValue = int | str | tuple[int, ...] | None

CLAUSES: tuple[str, ...] = ("taps", "block_size", "mask_token", "mask_token_id",
                            "draft_layers", "fc_input_width", "embeddings", "lm_head")
# The clauses a suite may expect (all of them), and the words their values take.
BORROWED = ("target", "draft")
DECLARED = "declared"  # `expected_contract = "declared"`: the checkpoint's own values

# Bounds past which a value is refused as absurd, not resolved (exit 2, naming the field).
MAX_LAYERS = 4096
MAX_BLOCK = 4096
MAX_TOKEN_ID = 2**31 - 1
MAX_WIDTH = 2**24


@dataclass(frozen=True)
class Clause:
    """One clause as one engine (or the checkpoint) resolves it.

    `value` None with no error: not resolved (`note`/`limit` say why). `source`: where the
    value came from (`dflash_config`, `top level`, `engine default`, `fallback formula`,
    `tokenizer`, ...). `error`: the engine's own exception, "Type: message", when it refuses.
    `limit`: what the audit could not reproduce (never the engine's decision).
    """

    value: ClauseValue
    source: str | None = None
    note: str | None = None
    error: str | None = None
    limit: str | None = None

    @property
    def resolved(self) -> bool:
        return self.error is None and self.limit is None and self.value is not None

    def to_dict(self) -> dict[str, object]:
        value = list(self.value) if isinstance(self.value, tuple) else self.value
        return {"value": value, "source": self.source, "note": self.note,
                "error": self.error, "limit": self.limit}

    def shown(self) -> str:
        """The cell a table prints."""
        if self.error is not None:
            return "refused"
        if self.limit is not None:
            return "?"
        return show_value(self.value)


def show_value(value: ClauseValue) -> str:
    if value is None:
        return "-"
    if isinstance(value, tuple):
        return "[" + ",".join(str(v) for v in value) + "]"
    return str(value)


def clause_from_answer(answer: Mapping[str, object] | None) -> Clause:
    """A Clause from an audit worker's JSON answer (values already plain JSON)."""
    if not isinstance(answer, Mapping):
        return Clause(None, limit="no answer")
    error = answer.get("error")
    text = f"{error.get('type')}: {error.get('message')}" if isinstance(error, Mapping) else None
    return Clause(_value(answer.get("value")), _str(answer.get("source")),
                  _str(answer.get("note")), text, _str(answer.get("limit")))


def _value(value: object) -> ClauseValue:
    if isinstance(value, list | tuple):
        return tuple(int(v) for v in value)
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int | str) or value is None:
        return value
    return str(value)


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


# --- what the checkpoint declares ----------------------------------------------------------


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _int(value: object, field: str, low: int, high: int) -> int:
    if not _is_int(value) or not low <= value <= high:
        raise DraftConfigError(f"draft config {field} must be an integer from {low} to "
                               f"{high}, got {value!r}")
    return int(value)


def _dflash(config: Mapping[str, object]) -> Mapping[str, object]:
    nested = config.get("dflash_config")
    if nested is None:
        return {}
    if not isinstance(nested, Mapping):
        raise DraftConfigError(
            f"draft config dflash_config must be a JSON object, got {type(nested).__name__}")
    return nested


def _text(config: Mapping[str, object]) -> Mapping[str, object]:
    nested = config.get("text_config")
    if nested is None:
        return config
    if not isinstance(nested, Mapping):
        raise DraftConfigError(
            f"draft config text_config must be a JSON object, got {type(nested).__name__}")
    return nested


def _declared(config: Mapping[str, object], key: str) -> tuple[object, str | None]:
    """(value, where): dflash_config first, then the top level (SGLang's precedence)."""
    nested = _dflash(config)
    if key in nested and nested[key] is not None:
        return nested[key], f"dflash_config.{key}"
    if config.get(key) is not None:
        return config[key], key
    return None, None


def validate_draft_config(config: object) -> None:
    """Refuse a draft config whose contract fields have the wrong type or an absurd value,
    naming the field (DraftConfigError, exit 2). Only shapes and bounds: what an engine
    would do with a well-formed value is the audit's to show, not this check's."""
    if not isinstance(config, Mapping):
        raise DraftConfigError(f"draft config must be a JSON object, got "
                               f"{type(config).__name__}")
    text = _text(config)
    _dflash(config)
    for key in ("num_hidden_layers", "num_target_layers"):
        holders = ((text, key), (config, key), (_dflash(config), f"dflash_config.{key}"))
        for holder, where in holders:
            if holder.get(key) is not None:
                _int(holder[key], where, 1, MAX_LAYERS)
    for key, high in (("hidden_size", MAX_WIDTH), ("vocab_size", MAX_TOKEN_ID)):
        if text.get(key) is not None:
            _int(text[key], key, 1, high)
    block, block_at = _declared(config, "block_size")
    if block is not None:
        _int(block, block_at or "block_size", 1, MAX_BLOCK)
    # mask_token_id is not checked here: its type and sign are the engine's own check
    # (every audited SGLang release's parse_dflash_draft_config refuses a non-integer or
    # negative id with its own message), so the audit shows that refusal, per release.
    mask, mask_at = _declared(config, "mask_token")
    if mask is not None and (not isinstance(mask, str) or not mask):
        raise DraftConfigError(f"draft config {mask_at} must be a non-empty string, got {mask!r}")
    _declared_taps(config)
    layer_types = text.get("layer_types", config.get("layer_types"))
    if layer_types is not None and (
            not isinstance(layer_types, list) or len(layer_types) > MAX_LAYERS
            or not all(isinstance(kind, str) for kind in layer_types)):
        raise DraftConfigError(f"draft config layer_types must be a list of strings, got "
                               f"{brief(layer_types)}")
    for key in ("sliding_window",):
        value = text.get(key, config.get(key))
        if value is not None:
            _int(value, key, 1, 2**31 - 1)
    swa = _dflash(config).get("swa_window_size")
    if swa is not None:
        _int(swa, "dflash_config.swa_window_size", 1, 2**31 - 1)
    for key in ("is_causal", "use_sliding_window", "has_embed_tokens", "has_lm_head"):
        value = text.get(key, config.get(key))
        if value is not None and not isinstance(value, bool):
            raise DraftConfigError(f"draft config {key} must be true or false, got "
                                   f"{brief(value)}")


def brief(value: object) -> str:
    """A value as an error message shows it: its repr, cut at 80 characters."""
    text = repr(value)
    return text if len(text) <= 80 else text[:79] + "…"


def _declared_taps(config: Mapping[str, object]) -> tuple[tuple[int, ...] | None, str | None]:
    """The declared target_layer_ids (layer-output ids), validated."""
    ids, where = _declared(config, "target_layer_ids")
    if ids is None:
        return None, None
    field = where or "target_layer_ids"
    if not isinstance(ids, list) or not ids or len(ids) > MAX_LAYERS:
        raise DraftConfigError(f"draft config {field} must be a non-empty list of layer "
                               f"ids, got {brief(ids)}")
    bound = _declared(config, "num_target_layers")[0]
    high = (bound - 1) if _is_int(bound) and 0 < bound <= MAX_LAYERS else MAX_LAYERS - 1
    for index, value in enumerate(ids):
        if not _is_int(value) or not 0 <= value <= high:
            limit = f" (num_target_layers is {bound})" if high != MAX_LAYERS - 1 else ""
            raise DraftConfigError(f"draft config {field}[{index}] must be a layer id from 0 to "
                                   f"{high}{limit}, got {brief(value)}")
    return tuple(int(v) for v in ids), field


def declared_contract(config: Mapping[str, object]) -> dict[str, Clause | None]:
    """What the checkpoint itself declares of each clause (None: left to the engine).

    Taps are converted to the stated convention: a target_layer_ids entry L (the output of
    layer L) is hidden_states[L + 1], in the declared order.
    """
    validate_draft_config(config)
    text = _text(config)
    taps, taps_from = _declared_taps(config)
    declared: dict[str, Clause | None] = dict.fromkeys(CLAUSES)
    if taps is not None:
        declared["taps"] = Clause(tuple(layer + 1 for layer in taps), taps_from,
                                  note=f"target_layer_ids {list(taps)} + 1")
    for key in ("block_size", "mask_token", "mask_token_id"):
        value, where = _declared(config, key)
        if key == "mask_token_id" and value is not None and not _is_int(value):
            declared[key] = Clause(brief(value), where, note="not an integer: each engine's "
                                                             "own parser judges it")
        elif isinstance(value, int | str):  # validated above: an int or a text
            declared[key] = Clause(value, where)
    layers = text.get("num_hidden_layers", config.get("num_hidden_layers"))
    if layers is not None:
        declared["draft_layers"] = Clause(_int(layers, "num_hidden_layers", 1, MAX_LAYERS),
                                          "num_hidden_layers")
    hidden = text.get("hidden_size")
    if taps is not None and hidden is not None:
        declared["fc_input_width"] = Clause(len(taps) * _int(hidden, "hidden_size", 1, MAX_WIDTH),
                                            note=f"{len(taps)} taps x hidden_size {hidden}")
    is_causal = text.get("is_causal", config.get("is_causal"))
    if is_causal is not None:  # per-layer attention: declared, compared by expected_layers
        declared["attention"] = Clause(None, "is_causal", note=f"is_causal {is_causal}")
    if config.get("has_embed_tokens") is not None:
        declared["embeddings"] = Clause("draft" if config["has_embed_tokens"] else "target",
                                        "has_embed_tokens")
    if config.get("has_lm_head") is not None:
        declared["lm_head"] = Clause("draft" if config["has_lm_head"] else "target",
                                     "has_lm_head")
    return declared


# --- an expectation, and a resolution's differences from it --------------------------------


def validate_expected_contract(expected: object, where: str = "expected_contract"
                               ) -> dict[str, ClauseValue] | str:
    """A suite's `expected_contract`: a table of clause -> value, or "declared" (the
    checkpoint's own values are the expectation). Raises DraftConfigError naming the key."""
    if expected == DECLARED:
        return DECLARED
    if not isinstance(expected, Mapping):
        raise DraftConfigError(f"{where} must be a table of clauses or \"declared\", got "
                               f"{brief(expected)}")
    unknown = sorted(set(expected) - set(CLAUSES))
    if unknown:
        raise DraftConfigError(f"{where} has unknown clauses {unknown}; known: "
                               f"{', '.join(CLAUSES)}")
    checked: dict[str, ClauseValue] = {}
    for key, value in expected.items():
        at = f"{where}.{key}"
        if key == "taps":
            if not isinstance(value, Sequence) or isinstance(value, str | bytes) or not value:
                raise DraftConfigError(f"{at} must be a non-empty list of hidden_states "
                                       f"indices, got {brief(value)}")
            checked[key] = tuple(_int(v, f"{at}[{i}]", 0, MAX_LAYERS) for i, v in
                                 enumerate(value))
        elif key in ("embeddings", "lm_head"):
            if value not in BORROWED:
                raise DraftConfigError(f"{at} must be \"target\" or \"draft\", got "
                                       f"{brief(value)}")
            checked[key] = value
        elif key == "mask_token":
            if not isinstance(value, str) or not value:
                raise DraftConfigError(f"{at} must be a non-empty string, got {brief(value)}")
            checked[key] = value
        else:
            low, high = {"block_size": (1, MAX_BLOCK), "mask_token_id": (0, MAX_TOKEN_ID),
                         "draft_layers": (1, MAX_LAYERS), "fc_input_width": (1, MAX_WIDTH)}[key]
            checked[key] = _int(value, at, low, high)
    return checked


def expectation_from_declared(config: Mapping[str, object]) -> dict[str, ClauseValue]:
    """`expected_contract = "declared"`: every clause the checkpoint declares."""
    return {name: clause.value for name, clause in declared_contract(config).items()
            if clause is not None}


def clause_differences(expected: Mapping[str, ClauseValue], resolved: Mapping[str, Clause],
                       who: str = "the engine") -> list[str]:
    """One line per expected clause the resolution does not meet, naming the clause. An
    expected clause the engine refuses, or the audit could not resolve, is a difference:
    a missing figure is never a pass."""
    lines = []
    for name in CLAUSES:
        if name not in expected:
            continue
        want = expected[name]
        got = resolved.get(name)
        if got is None or (got.value is None and got.error is None and got.limit is None):
            why = f" ({got.note})" if got is not None and got.note else ""
            lines.append(f"{name}: expected {show_value(want)}, {who} resolved none{why}")
        elif got.error is not None:
            lines.append(f"{name}: expected {show_value(want)}, {who} refuses: {got.error}")
        elif got.limit is not None:
            lines.append(f"{name}: expected {show_value(want)}, not resolved: {got.limit}")
        elif got.value != want:
            lines.append(f"{name}: expected {show_value(want)}, {who} resolves "
                         f"{show_value(got.value)}" + (f" (from {got.source})"
                                                       if got.source else ""))
    return lines
