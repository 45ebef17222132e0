"""The draft's per-layer attention as the build under test resolves it, before any launch
(`attention_table`), and its differences from the suite's expected contract
(`contract_differences`)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from harness.errors import EngineError, HarnessError
from harness.results.record import LayerRow
from harness.run.plan import PreparedEngine
from harness.suite.model import LoadedSuite, Suite, VLLMEngine
from harness.suite.serving import ReferenceEngine, SGLangEngine


def attention_table(loaded: LoadedSuite, engine: PreparedEngine) -> list[LayerRow] | None:
    """The draft's per-layer attention as this build resolves it, before any launch.

    SGLang builds are evaluated with their own config loading and resolver code (`harness
    audit`); the reference engine replays the behaviour its suite names. Without an
    expected contract, an unreachable draft config only leaves the table empty; a draft the
    version's own code rejects stops the run with that version's message (exit 5).
    """
    from harness.audit.errors import VersionRejected

    suite = loaded.suite
    expected = suite.draft.expected_layers if suite.draft else None
    if engine.draft_config is None:
        return None
    if isinstance(suite.engine, SGLangEngine) and suite.speculative.algorithm != "DFLASH" \
            and expected is None:
        # The audit resolves a DFlash draft's attention; a STANDALONE or EAGLE draft is
        # the model's own causal stack, which it would misreport as bidirectional.
        return None
    try:
        if isinstance(suite.engine, VLLMEngine):
            from harness.audit.config import locate_draft_config
            from harness.engines.vllm.audit import vllm_layers

            # vLLM's own resolver (model_executor/models/qwen3_dflash.py) in its environment
            path, _ = locate_draft_config(engine.draft_config, engine.draft_revision)
            resolved = vllm_layers(engine.python, Path(path))
            explicit = _explicit_causality(Path(path))
            return [LayerRow(index=row["index"], layer_type=row["layer_type"],
                             window=row["window"], causal=row["causal"], explicit=explicit)
                    for row in resolved["layers"]]
        if isinstance(suite.engine, ReferenceEngine):
            from harness.audit import load_draft_config
            from harness.suite.attention import resolve_layers

            config, _ = load_draft_config(engine.draft_config)
            layers = resolve_layers(config, suite.engine.attention_policy)
        else:
            from harness.audit import audit_for_build
            from harness.audit.source import checkout_source

            parent = engine.facts.sglang_parent if engine.facts else None
            if parent is None:
                raise EngineError(f"cannot locate sglang's package folder in {engine.python}")
            # the version's own config loading and resolver, on the draft's real folder
            layers = audit_for_build(engine.draft_config, checkout_source(parent),
                                     revision=engine.draft_revision)
    except VersionRejected:
        raise  # SGLang itself would refuse this draft: the run stops with its message
    except HarnessError:
        if expected is not None:
            raise
        return None
    return [LayerRow.model_validate(layer.to_dict()) for layer in layers]


def _explicit_causality(config_json: Path) -> bool:
    """Whether the draft declares its causality (`is_causal` or `dflash_config.causal`)."""
    try:
        config = json.loads(config_json.read_text())
    except (OSError, ValueError):
        return False
    dflash = config.get("dflash_config") if isinstance(config.get("dflash_config"), dict) \
        else {}
    return config.get("is_causal") is not None or dflash.get("causal") is not None


def contract_differences(suite: Suite, attention: Sequence[LayerRow] | None) -> list[str]:
    expected = suite.draft.expected_layers if suite.draft else None
    if expected is None or attention is None:
        return []
    from harness.audit import check_contract
    from harness.suite.attention import LayerAttention

    actual = [LayerAttention(**row.model_dump(include={"index", "layer_type", "window",
                                                       "causal", "explicit"}))
              for row in attention]
    return check_contract([layer.model_dump() for layer in expected], actual)
