"""Property-based: any document or text through `parse_suite` gives a Suite or a SuiteError.

Documents are emitted with `tomli_w` (add `tomli-w` to the `test` extra).
"""

from __future__ import annotations

import copy
import json
import math
import tomllib
from typing import Any

import pytest
import tomli_w
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.errors import SuiteError
from harness.suite.model import Suite, parse_suite
from tests.fixtures.suites_and_host import FULL_SGLANG_SUITE, MINIMAL_SUITE

FUZZ = settings(max_examples=150, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

KNOWN_KEYS = [
    "name", "description", "nightly", "engine", "target", "draft", "speculative", "topology",
    "workload", "floors", "baselines", "kind", "model", "revision", "expected_layers", "causal",
    "window", "gpus", "tp_size", "gpu_types", "min_memory_gib", "accept_length", "accuracy",
    "strict", "block_size", "num_draft_tokens", "algorithm", "extra_args", "env", "questions",
    "shots", "seed", "label", "source", "alpha", "beta", "attention_policy", "draft_noise",
]
keys = st.one_of(st.sampled_from(KNOWN_KEYS), st.text(min_size=1, max_size=12))
scalars = st.one_of(
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    st.sampled_from(["sglang", "reference", "DFLASH", "gsm8k", "fixed", "H100", ""]),
    st.dates(),
    st.datetimes(),
    st.times(),
)
values = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(keys, children, max_size=4),
    ),
    max_leaves=20,
)
documents = st.dictionaries(keys, values, max_size=8)


def _check(text: str) -> None:
    try:
        result = parse_suite(text, "fuzz.toml")
    except SuiteError as error:
        assert error.message.startswith("fuzz.toml:")
        return
    suite, document = result
    assert isinstance(suite, Suite)
    assert isinstance(document, dict)


@FUZZ
@given(documents)
def test_any_toml_document(document: dict[str, Any]) -> None:
    text = tomli_w.dumps(document)
    _check(text)


def _paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    out = []
    if isinstance(node, dict):
        for key, value in node.items():
            out.append((*prefix, key))
            out += _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            out.append((*prefix, index))
            out += _paths(value, (*prefix, index))
    return out


def _parent(document: Any, path: tuple) -> Any:
    node = document
    for part in path[:-1]:
        node = node[part]
    return node


@st.composite
def mutated_suites(draw: st.DrawFn) -> dict[str, Any]:
    seed = draw(st.sampled_from([FULL_SGLANG_SUITE, MINIMAL_SUITE]))
    document = tomllib.loads(seed)
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        paths = _paths(document)
        path = draw(st.sampled_from(paths))
        parent = _parent(document, path)
        action = draw(st.sampled_from(["drop", "retype", "add"]))
        if action == "drop":
            del parent[path[-1]]
        elif action == "retype":
            parent[path[-1]] = draw(values)
        else:
            target = parent[path[-1]] if isinstance(parent[path[-1]], dict) else document
            target[draw(keys)] = draw(values)
    return document


@FUZZ
@given(mutated_suites())
def test_mutated_valid_suite(document: dict[str, Any]) -> None:
    _check(tomli_w.dumps(document))


@FUZZ
@given(st.text(max_size=300))
def test_any_text(text: str) -> None:
    _check(text)


@FUZZ
@given(st.lists(st.sampled_from(FULL_SGLANG_SUITE.splitlines(keepends=True)), max_size=40),
       st.text(max_size=20))
def test_shuffled_suite_lines(lines: list[str], noise: str) -> None:
    _check("".join(lines) + noise)


def test_mutation_strategy_seeds_are_valid() -> None:
    # the seeds of the mutations validate, so a SuiteError above comes from the mutation
    for seed in (FULL_SGLANG_SUITE, MINIMAL_SUITE):
        document = copy.deepcopy(tomllib.loads(seed))
        assert isinstance(parse_suite(tomli_w.dumps(document), "seed.toml")[0], Suite)


# ------------------------------------------------------------------ the impossible, refused

def _plain(node: Any, depth: int = 1) -> None:
    """A validated document holds finite numbers, 64-bit integers and shallow nesting
    (harness.suite.document's limits, checked here on their own)."""
    assert depth <= 16
    children = node.values() if isinstance(node, dict) else node if isinstance(node, list) \
        else None
    if children is None:
        if isinstance(node, float):
            assert math.isfinite(node)
        if isinstance(node, int) and not isinstance(node, bool):
            assert -(2**63) <= node < 2**63
        return
    for child in children:
        _plain(child, depth + 1)


@FUZZ
@given(mutated_suites())
def test_a_valid_mutated_suite_holds_only_possible_numbers(document: dict[str, Any]) -> None:
    try:
        _, parsed = parse_suite(tomli_w.dumps(document), "fuzz.toml")
    except SuiteError:
        return
    _plain(parsed)


def _nested(kind: str, depth: int) -> str:
    if kind == "array":
        return "x = " + "[" * depth + "1" + "]" * depth
    if kind == "inline":
        return "x = " + "{ a = " * depth + "1" + " }" * depth
    if kind == "header":
        return "[" + ".".join(["a"] * depth) + "]\nb = 1"
    return "x = " + "[{ a = " * depth + "1" + " }]" * depth


@FUZZ
@given(st.sampled_from(["array", "inline", "header", "mixed"]),
       st.integers(min_value=1, max_value=3000), st.booleans())
def test_any_nesting_depth_is_a_suite_error(kind: str, depth: int, first: bool) -> None:
    nested = _nested(kind, depth)
    if kind == "header" and not first:
        text = MINIMAL_SUITE + "\n" + nested  # a table after the suite's own tables
    else:
        text = nested + "\n" + MINIMAL_SUITE if kind != "header" else nested + "\n"
    with pytest.raises(SuiteError) as caught:
        parse_suite(text, "fuzz.toml")
    assert caught.value.message.startswith("fuzz.toml:")


@FUZZ
@given(st.integers(min_value=1, max_value=64), st.sampled_from(["server_avg", "per_request"]),
       st.floats(min_value=1.0, max_value=200.0), st.booleans())
def test_an_accept_length_floor_validates_exactly_when_a_run_can_reach_it(
        block: int, metric: str, floor: float, strict: bool) -> None:
    # DFLASH: a verify step of block B makes at most B tokens (server_avg); per_request also
    # counts each request's prefill token, at most one per step (harness.speculation.bounds)
    top = block + (1 if metric == "per_request" else 0)
    document = tomllib.loads(MINIMAL_SUITE)
    document["speculative"] = {"algorithm": "DFLASH", "block_size": block}
    document["floors"] = {"accept_length": floor, "metric": metric, "strict": strict}
    possible = floor < top if strict else floor <= top
    try:
        parse_suite(tomli_w.dumps(document), "fuzz.toml")
    except SuiteError as error:
        assert not possible, error.message
        assert "floors.accept_length: a run must" in error.message
        return
    assert possible


@FUZZ
@given(st.one_of(st.integers(min_value=-(2**80), max_value=2**80),
                 st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=8)))
def test_max_tokens_of_any_value(value: Any) -> None:
    document = tomllib.loads(MINIMAL_SUITE)
    document["workload"] = {"max_tokens": value}
    text = tomli_w.dumps(document)
    try:
        suite, _ = parse_suite(text, "fuzz.toml")
    except SuiteError as error:
        assert "workload.max_tokens" in error.message
        return
    # the reference engine's tiny target is named by no path here: the cap applies
    assert isinstance(value, int) and 1 <= value < 2**24
    assert suite.workload.max_tokens == value


@FUZZ
@given(st.recursive(st.one_of(st.floats(allow_nan=True, allow_infinity=True),
                              st.integers(), st.text(max_size=4)),
                    lambda children: st.one_of(st.lists(children, max_size=3),
                                               st.dictionaries(st.text(max_size=4), children,
                                                               max_size=3)),
                    max_leaves=12),
       st.integers(min_value=0, max_value=3000))
def test_a_targets_config_json_of_any_shape(tmp_path_factory: pytest.TempPathFactory,
                                            config: Any, depth: int) -> None:
    folder = tmp_path_factory.mktemp("target")
    (folder / "config.json").write_text("[" * depth + json.dumps(config) + "]" * depth)
    text = FULL_SGLANG_SUITE.replace('model = "org/target"', f'model = "{folder}"')
    try:
        parse_suite(text, "fuzz.toml")
    except SuiteError as error:
        assert "target.model" in error.message or "workload.max_tokens" in error.message
