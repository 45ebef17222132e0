"""The draft's contract as the build under test resolves it, before any launch: per-layer
attention (`attention_table`) and every other clause (`preflight`), and their differences
from the suite's expected contract (`contract_differences`)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from harness.audit import audit_build, check_contract, load_draft_config
from harness.audit.config import locate_draft_config
from harness.audit.errors import VersionRejected
from harness.audit.source import checkout_source
from harness.audit.target import AuditTarget, load_target
from harness.audit.vllm import installed_column
from harness.engines.vllm.audit import vllm_layers
from harness.engines.vllm.launch import num_speculative_tokens
from harness.errors import EngineError, HarnessError
from harness.results.record import ClauseRow, LayerRow
from harness.run.plan import PreparedEngine
from harness.suite.attention import LayerAttention, resolve_layers
from harness.suite.draft_contract import (
    CLAUSES,
    Clause,
    clause_differences,
    expectation_from_declared,
)
from harness.suite.model import LoadedSuite, Suite, VLLMEngine
from harness.suite.serving import ReferenceEngine, SGLangEngine

SERVER_BLOCK_FLAG = "--speculative-num-draft-tokens"
SERVED_BLOCK_VLLM = "--speculative-config num_speculative_tokens + 1"


@dataclass(frozen=True)
class Preflight:
    """What the build's own code resolves for the draft, before the launch."""

    attention: list[LayerRow] | None
    clauses: dict[str, Clause] = field(default_factory=dict)  # the other clauses
    config: Mapping[str, object] | None = None  # the draft's config.json (for "declared")

    def clause_rows(self) -> dict[str, ClauseRow] | None:
        if not self.clauses:
            return None
        return {name: ClauseRow.model_validate(clause.to_dict())
                for name, clause in self.clauses.items()}


def attention_table(loaded: LoadedSuite, engine: PreparedEngine) -> list[LayerRow] | None:
    """The draft's per-layer attention as this build resolves it, before any launch."""
    return preflight(loaded, engine).attention


def preflight(loaded: LoadedSuite, engine: PreparedEngine) -> Preflight:
    """The draft's per-layer attention and other clauses as this build resolves them.

    SGLang builds are evaluated with their own config loading and resolver code (`harness
    audit`); the reference engine replays the behaviour its suite names. Without an
    expected contract, an unreachable draft config only leaves the table empty; a draft the
    version's own code rejects stops the run with that version's message (exit 5).
    """
    suite = loaded.suite
    expected = suite.draft.expected_layers if suite.draft else None
    wanted = expected is not None or (suite.draft is not None
                                      and suite.draft.expected_contract is not None)
    if engine.draft_config is None:
        return Preflight(None)
    if isinstance(suite.engine, SGLangEngine) and suite.speculative.algorithm != "DFLASH" \
            and not wanted:
        # The audit resolves a DFlash draft's attention; a STANDALONE or EAGLE draft is
        # the model's own causal stack, which it would misreport as bidirectional.
        return Preflight(None)
    config: Mapping[str, object] | None = None
    clauses: dict[str, Clause] = {}
    try:
        if isinstance(suite.engine, VLLMEngine):
            # vLLM's own resolver (model_executor/models/qwen3_dflash.py) in its environment
            path, _ = locate_draft_config(engine.draft_config, engine.draft_revision)
            resolved = vllm_layers(engine.python, Path(path))
            explicit = _explicit_causality(Path(path))
            config, clauses = _vllm_clauses(suite, engine, engine.draft_config, Path(path))
            return Preflight([LayerRow(index=row["index"], layer_type=row["layer_type"],
                                       window=row["window"], causal=row["causal"],
                                       explicit=explicit)
                              for row in resolved["layers"]], clauses, config)
        if isinstance(suite.engine, ReferenceEngine):
            config, _ = load_draft_config(engine.draft_config)
            layers = resolve_layers(config, suite.engine.attention_policy)
        else:
            parent = engine.facts.sglang_parent if engine.facts else None
            if parent is None:
                raise EngineError(f"cannot locate sglang's package folder in {engine.python}")
            config, _ = load_draft_config(engine.draft_config, engine.draft_revision)
            # the version's own config loading and code, on the draft's real folder and
            # against the target served beside it
            result = audit_build(engine.draft_config, checkout_source(parent),
                                 revision=engine.draft_revision, target=_target(engine))
            if result.error is not None:
                raise VersionRejected(result.source.label, result.error.type,
                                      result.error.message, result.error.stage,
                                      result.error.where)
            assert result.layers is not None
            layers = result.layers
            clauses = served_clauses(suite, result.contract)
    except VersionRejected:
        raise  # SGLang itself would refuse this draft: the run stops with its message
    except HarnessError:
        if wanted:
            raise
        return Preflight(None)
    return Preflight([LayerRow.model_validate(layer.to_dict()) for layer in layers], clauses,
                     config)


def _vllm_clauses(suite: Suite, engine: PreparedEngine, draft_config: str, config_json: Path
                  ) -> tuple[Mapping[str, object] | None, dict[str, Clause]]:
    """The draft's config and its clauses by the audit's vLLM column, run on the code of
    the vLLM this run launches (harness/audit/vllm.py), with the block the server is
    given: vLLM reads no block size from a DFlash draft, it proposes the suite's
    `num_speculative_tokens` (block size - 1) after the bonus token."""
    if suite.speculative.algorithm != "DFLASH":
        return None, {}
    config, _ = load_draft_config(draft_config, engine.draft_revision)
    target = _target(engine)
    try:
        column = installed_column(engine.python, config_json.parent, config,
                                  getattr(target, "num_layers", None))
    except HarnessError:
        if suite.draft is not None and suite.draft.expected_contract is not None:
            raise
        return config, {}  # the attention table stands; no clause to compare at run time
    if column.refused is not None or column.limit is not None:
        return config, {}
    clauses = {name: column.clauses[name] for name in CLAUSES if name in column.clauses}
    own = clauses.get("block_size")
    clauses["block_size"] = Clause(num_speculative_tokens(suite) + 1,
                                   SERVED_BLOCK_VLLM,
                                   note=own.note if own is not None else None)
    return config, clauses


def _target(engine: PreparedEngine) -> AuditTarget | None:
    """The target served beside the draft, as the audit reads it (its folder's config and
    tokenizer); None when it cannot be read here (a hub id not in the local cache)."""
    target = engine.models.target if engine.models else None
    if not target:
        return None
    try:
        path, _ = locate_draft_config(target, getattr(engine.models, "target_revision", None))
        return load_target(Path(path).parent)
    except HarnessError:
        return None


def served_clauses(suite: Suite, clauses: Mapping[str, Clause]) -> dict[str, Clause]:
    """The clauses as the server will use them: the suite's `num_draft_tokens` (the
    server's --speculative-num-draft-tokens) is the block size SGLang's DFLASH worker
    runs with, whatever the draft says; the draft's own value is kept in the note."""
    served = dict(clauses)
    flag = suite.speculative.draft_tokens
    if flag is not None and "block_size" in served:
        own = served["block_size"]
        served["block_size"] = Clause(flag, SERVER_BLOCK_FLAG,
                                      note=f"the draft's own: {own.shown()}"
                                           + (f" ({own.source})" if own.source else ""))
    return served


def _explicit_causality(config_json: Path) -> bool:
    """Whether the draft declares its causality (`is_causal` or `dflash_config.causal`)."""
    try:
        config = json.loads(config_json.read_text())
    except (OSError, ValueError):
        return False
    dflash = config.get("dflash_config") if isinstance(config.get("dflash_config"), dict) \
        else {}
    return config.get("is_causal") is not None or dflash.get("causal") is not None


def contract_differences(suite: Suite, attention: Sequence[LayerRow] | None,
                         checked: Preflight | None = None) -> list[str]:
    """Every difference from the suite's expected_layers and expected_contract, each
    naming its layer or clause."""
    found = _layer_differences(suite, attention)
    contract = suite.draft.expected_contract if suite.draft else None
    if contract is None:
        return found
    if checked is None or not checked.clauses:
        return [*found, "expected_contract: this build's clauses were not resolved before "
                        "the launch (the audit resolves them for SGLang builds)"]
    if isinstance(contract, str):  # "declared", the one text expected_contract may be
        if checked.config is None:
            return [*found, "expected_contract = \"declared\": the draft's config.json "
                            "could not be read"]
        expected = expectation_from_declared(checked.config)
    else:
        expected = contract
    return [*found, *clause_differences(expected, checked.clauses, "the build")]


def _layer_differences(suite: Suite, attention: Sequence[LayerRow] | None) -> list[str]:
    expected = suite.draft.expected_layers if suite.draft else None
    if expected is None or attention is None:
        return []
    actual = [LayerAttention(**row.model_dump(include={"index", "layer_type", "window",
                                                       "causal", "explicit"}))
              for row in attention]
    return check_contract([layer.model_dump() for layer in expected], actual)
