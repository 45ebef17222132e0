"""The expected per-layer attention contract of a draft, and how a table differs from it.

Suites declare it as `[draft] expected_layers = [{causal = true, window = 2048}, ...]`:
one inline table per draft layer, `window` absent for full attention.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

from harness.errors import BadInput, SuiteError
from harness.files import SUITES_DIR
from harness.suite.attention import DraftConfigError, LayerAttention
from harness.suite.document import DocumentError, load_json, load_toml
from harness.suite.draft_contract import (
    DECLARED,
    ClauseValue,
    expectation_from_declared,
    validate_expected_contract,
)
from harness.suite.model import resolve_suite_path

EXPECTED_KEYS = frozenset({"causal", "window"})


class LayerExpectation(TypedDict):
    """One draft layer's expected attention, validated (`window` None: full)."""

    causal: bool
    window: int | None


class ContractError(BadInput):
    """An expectation that cannot be read: the message names the file and the entry."""


def _attention_word(causal: bool) -> str:
    return "causal" if causal else "bidirectional"


def _window_words(window: int | None) -> str:
    return "full attention" if window is None else f"window {window}"


def validate_expected(expected: object, source: str = "expected_layers") -> list[LayerExpectation]:
    """Check the shape of an expectation; return it as plain dicts with `window` filled in."""
    if isinstance(expected, str | bytes) or not isinstance(expected, Sequence):
        raise ContractError(f"{source} must be a list of per-layer tables, got {expected!r}")
    layers: list[LayerExpectation] = []
    for index, entry in enumerate(expected):
        where = f"{source}[{index}]"
        if not isinstance(entry, Mapping):
            raise ContractError(f"{where} must be a table like {{causal = true}}, got {entry!r}")
        unknown = set(entry) - EXPECTED_KEYS
        if unknown:
            raise ContractError(
                f"{where} has unknown keys {sorted(unknown)}; allowed: causal, window"
            )
        causal = entry.get("causal")
        if not isinstance(causal, bool):
            raise ContractError(f"{where}.causal must be true or false, got {causal!r}")
        window = entry.get("window")
        if window is not None and (
            isinstance(window, bool) or not isinstance(window, int) or window <= 0
        ):
            raise ContractError(f"{where}.window must be a positive integer, got {window!r}")
        layers.append({"causal": causal, "window": window})
    return layers


def check_contract(
    expected: Sequence[Mapping[str, object]], actual: Sequence[LayerAttention]
) -> list[str]:
    """Human-readable differences between the expected and the resolved layers; empty = same."""
    wanted = validate_expected(expected)
    differences = []
    if len(wanted) != len(actual):
        differences.append(f"expected {len(wanted)} draft layers, got {len(actual)}")
    for index, (want, got) in enumerate(zip(wanted, actual, strict=False)):
        if want["causal"] != got.causal:
            differences.append(
                f"layer {index}: expected {_attention_word(want['causal'])}, "
                f"got {_attention_word(got.causal)}"
            )
        if want["window"] != got.window:
            differences.append(
                f"layer {index}: expected {_window_words(want['window'])}, "
                f"got {_window_words(got.window)}"
            )
    return differences


def expected_from_layers(layers: Sequence[LayerAttention]) -> list[dict[str, object]]:
    """The contract a resolved table satisfies, in suite form (window only when sliding)."""
    return [
        {"causal": layer.causal, **({} if layer.window is None else {"window": layer.window})}
        for layer in layers
    ]


def _expected_in(document: Mapping[str, object], source: str) -> list[LayerExpectation]:
    # A suite nests it under [draft]; a bare expectation file has it at the top.
    draft = document.get("draft")
    if isinstance(draft, Mapping) and "expected_layers" in draft:
        return validate_expected(draft["expected_layers"], f"{source}: draft.expected_layers")
    if "expected_layers" in document:
        return validate_expected(document["expected_layers"], f"{source}: expected_layers")
    raise ContractError(f"{source} declares no draft.expected_layers nor expected_layers")


def _find_file(spec: str, suites_dir: Path | None) -> Path:
    """A file, or a suite found by file stem or `name` as `harness run` finds it."""
    path = Path(spec).expanduser()
    if path.is_file():
        return path
    try:
        return resolve_suite_path(spec, suites_dir or SUITES_DIR)
    except SuiteError as error:
        raise ContractError(f"--expect {spec}: no such file; {error.message}") from None


@dataclass(frozen=True)
class Expectation:
    """What `--expect` names: per-layer attention, the other clauses, or both."""

    layers: list[LayerExpectation] | None
    contract: dict[str, ClauseValue] | str | None  # or "declared": the checkpoint's values
    origin: str

    def clauses_for(self, config: Mapping[str, object]) -> dict[str, ClauseValue] | None:
        """The expected clauses for this draft config ("declared" read from it)."""
        if self.contract == DECLARED:
            return expectation_from_declared(config)
        return None if self.contract is None or isinstance(self.contract, str) \
            else dict(self.contract)


def load_expectation(spec: str, suites_dir: Path | None = None) -> Expectation:
    """`--expect FILE|SUITE`: `expected_layers` and/or `expected_contract` (top level or
    under [draft]); at least one of them."""
    document, origin = _document(spec, suites_dir)
    if isinstance(document, list):
        return Expectation(validate_expected(document, origin), None, origin)
    draft = document.get("draft") if isinstance(document.get("draft"), Mapping) else {}
    holder = draft if ("expected_layers" in draft or "expected_contract" in draft) \
        else document
    prefix = "draft." if holder is draft else ""
    layers = None
    if "expected_layers" in holder:
        layers = validate_expected(holder["expected_layers"],
                                   f"{origin}: {prefix}expected_layers")
    contract = None
    if "expected_contract" in holder:
        try:
            contract = validate_expected_contract(holder["expected_contract"],
                                                  f"{origin}: {prefix}expected_contract")
        except DraftConfigError as error:
            raise ContractError(str(error)) from None
    if layers is None and contract is None:
        raise ContractError(f"{origin} declares no expected_layers nor expected_contract "
                            "(top level or under [draft])")
    return Expectation(layers, contract, origin)


def _document(spec: str, suites_dir: Path | None) -> tuple[Any, str]:
    path = _find_file(spec, suites_dir)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ContractError(f"{path}: cannot read: {error}") from error
    try:
        document = load_json(text) if path.suffix == ".json" else load_toml(text)
    except DocumentError as error:  # not JSON/TOML, nested past parsing, not finite
        raise ContractError(f"{path}: {error}") from None
    if not isinstance(document, Mapping | list):
        raise ContractError(f"{path}: expected a table with expected_layers or "
                            "expected_contract")
    return document, str(path)


def load_expected(spec: str, suites_dir: Path | None = None) -> tuple[list[LayerExpectation], str]:
    """`--expect FILE|SUITE`: a suite path or name, or a JSON/TOML file; returns (layers, where)."""
    document, where = _document(spec, suites_dir)
    if isinstance(document, list):  # a bare JSON list of layers
        return validate_expected(document, where), where
    return _expected_in(document, where), where
