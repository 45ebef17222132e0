"""Every release's own code on the config object it builds (wheels + transformers envs).

Needs the 0.5.17..0.5.23 wheels in $HARNESS_SGLANG_WHEELS (`nox -s tests` fetches them)
and the transformers 5.12.1 / 5.19.0 environments (made once under the harness cache,
file-locked, about 1-2 minutes each); without them these tests skip and say why.
"""

from __future__ import annotations

import ast
import json
import zipfile
from typing import Any

import pytest

from harness.audit import VersionRejected, audit_for_build
from harness.audit.evaluate import evaluate_many
from harness.suite.attention import resolve_layers

from .conftest import (
    RELEASES,
    gemma4_dflash,
    nemotron_35_draft,
    release_sources,
    wheel_for,
    with_is_causal,
)

SLIDING_WINDOW_ERROR = "DFLASH sliding_attention layers require config.sliding_window."


def _qwen3_three_layers(use_sliding_window: bool) -> dict[str, Any]:
    return {**gemma4_dflash(), "num_hidden_layers": 3, "use_sliding_window": use_sliding_window,
            "layer_types": ["sliding_attention", "sliding_attention", "full_attention"]}


CONFIGS: dict[str, dict[str, Any]] = {
    "gemma-absent": gemma4_dflash(),
    "gemma-true": with_is_causal(gemma4_dflash(), True),
    "gemma-false": with_is_causal(gemma4_dflash(), False),
    "nemotron": nemotron_35_draft(),
    "qwen3-no-sliding": _qwen3_three_layers(False),
    "qwen3-sliding": _qwen3_three_layers(True),
    "qwen3-no-layer-types": {"architectures": ["DFlashDraftModel"], "model_type": "qwen3",
                             "num_hidden_layers": 2},
    "no-model-type": {"num_hidden_layers": 2, "layer_types": ["full_attention"] * 2},
    "muse-registered": {"architectures": ["DFlashDraftModel"],
                        "model_type": "muse_glimmer_assistant", "num_hidden_layers": 2,
                        "layer_types": ["sliding_attention", "full_attention"],
                        "sliding_window": 1024},
}


@pytest.fixture(scope="module")
def releases() -> list[Any]:
    return release_sources(*RELEASES)


@pytest.fixture(scope="module")
def tables(releases, tmp_path_factory) -> dict[str, dict[str, Any]]:
    """Every config under every release, evaluated together: one worker per environment.
    Once per test session: the first xdist worker evaluates (under the lock), the other
    reads the answers it cached (tests/audit/conftest.py, fresh_audit_answers)."""
    from filelock import FileLock

    from tests.shared import session_shared_dir

    folder = tmp_path_factory.mktemp("drafts")
    paths = []
    for name, config in CONFIGS.items():
        (folder / name).mkdir()
        paths.append(folder / name / "config.json")
        paths[-1].write_text(json.dumps(config))
    with FileLock(str(session_shared_dir(tmp_path_factory, "audit-answers") / "tables.lock")):
        answers = evaluate_many(paths, releases)
    return {name: {r.source.version: r for r in results}
            for name, results in zip(CONFIGS, answers, strict=True)}


def behaviour_read_from_wheel(version: str) -> str:
    """Read independently of the audit: what the wheel's resolver does for a sliding layer
    (legacy: hard-coded DECODER; fixed: DECODER only as the default of an explicit value)."""
    with zipfile.ZipFile(wheel_for(version)) as wheel:
        text = wheel.read("sglang/srt/models/dflash.py").decode()
    tree = ast.parse(text)
    entry = next(node for node in tree.body if isinstance(node, ast.FunctionDef)
                 and node.name == "_get_dflash_layer_attention_params")  # fmt: skip
    body = ast.get_source_segment(text, entry) or ""
    if "return sliding_window_size, AttentionType.DECODER" in body:
        return "legacy"
    assert "default=AttentionType.DECODER" in body, f"{version}: unknown resolver shape"
    return "fixed"


@pytest.mark.parametrize("is_causal", [None, True, False], ids=["absent", "true", "false"])
def test_gemma_shape_every_release_agrees_with_its_wheel(tables, is_causal) -> None:
    config = with_is_causal(gemma4_dflash(), is_causal)
    results = tables[f"gemma-{'absent' if is_causal is None else str(is_causal).lower()}"]
    for version in RELEASES:
        result = results[version]
        assert result.error is None, (version, result.error)
        expected = resolve_layers(config, behaviour_read_from_wheel(version))  # type: ignore[arg-type]
        assert result.layers == expected, version
        assert result.config_class == "Qwen3Config"
    causal = {v: [layer.causal for layer in results[v].layers or []] for v in RELEASES}
    if is_causal is False:  # legacy ignored is_causal on sliding layers; the fix honours it
        assert causal["0.5.17"] == [True] * 4 + [False]
        assert all(causal[v] == [False] * 5 for v in RELEASES[1:])
    else:
        assert len({tuple(table) for table in causal.values()}) == 1
    explicit = [layer.explicit for layer in results["0.5.23"].layers or []]
    assert explicit == [is_causal is not None] * 5


def test_nemotron_shape_rejected_before_0_5_19_then_window_512(tables) -> None:
    results = tables["nemotron"]
    for version in ("0.5.17", "0.5.18"):
        error = results[version].error
        assert results[version].layers is None
        assert error is not None and (error.type, error.message) == ("ValueError",
                                                                     SLIDING_WINDOW_ERROR)
        assert error.stage == "resolve" and error.where == "layer 0"
    for version in RELEASES[2:]:
        assert results[version].cells() == [(True, 512), (True, 512), (False, None)], version


def test_qwen3_use_sliding_window_decides_the_window(tables) -> None:
    for version in RELEASES:
        kept = tables["qwen3-sliding"][version]
        assert kept.cells() == [(True, 2048), (True, 2048), (False, None)], version
        # Qwen3Config drops sliding_window, and SGLang's own code then raises
        dropped = tables["qwen3-no-sliding"][version].error
        assert dropped is not None and dropped.message == SLIDING_WINDOW_ERROR, version


def test_transformers_fills_layer_types_the_harness_model_would_not(tables) -> None:
    result = tables["qwen3-no-layer-types"]["0.5.23"]
    # Qwen3Config writes layer_types = full_attention per layer; SGLang reads what it built.
    assert [layer.layer_type for layer in result.layers or []] == ["full_attention"] * 2


def test_config_transformers_cannot_load_is_the_versions_error(tables) -> None:
    result = tables["no-model-type"]["0.5.23"]
    assert result.error is not None and result.error.stage == "load"
    assert result.layers is None and "model_type" in result.error.message


def test_behaviours_named_from_probes(tables) -> None:
    results = tables["gemma-absent"]
    assert results["0.5.17"].behaves_as == ["legacy"]
    assert all(results[v].behaves_as == ["fixed"] for v in RELEASES[1:])
    assert results["0.5.23"].accepts_plain_dict is False  # it calls get_text_config()


def test_audit_for_build_raises_the_versions_own_error(releases, tmp_path) -> None:
    with pytest.raises(VersionRejected) as raised:
        audit_for_build(nemotron_35_draft(), releases[0])
    error = raised.value
    assert (error.version, error.exception, error.detail) == ("sglang 0.5.17", "ValueError",
                                                              SLIDING_WINDOW_ERROR)
    assert error.exit_code == 5 and "0.5.17" in error.message
    layers = audit_for_build(nemotron_35_draft(), wheel_for("0.5.23"))
    assert [(layer.causal, layer.window) for layer in layers] == [(True, 512), (True, 512),
                                                                  (False, None)]


def test_model_type_sglang_registers_is_built_by_its_own_class(tables) -> None:
    results = tables["muse-registered"]
    # 0.5.17 has no such class and transformers knows no such model_type
    assert results["0.5.17"].error is not None and results["0.5.17"].error.stage == "load"
    for version in RELEASES[1:]:
        result = results[version]
        assert result.config_class == "MuseGlimmerAssistantConfig", version
        assert result.built_by == "sglang HfModelConfigParser.parse"
        # the class declares is_causal = False: explicit, so every layer is bidirectional
        assert [(layer.causal, layer.window, layer.explicit) for layer in result.layers or []] \
            == [(False, 1024, True), (False, None, True)]
