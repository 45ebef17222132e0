"""`harness audit`: a draft's contract (per-layer attention and every other clause) under
SGLang versions' and vLLM's own code.

Light to import (stdlib only): every name below is loaded on first use.
"""

from __future__ import annotations

import importlib
import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from harness.audit.errors import (
    VERSION_REJECTS,
    AuditLimitError,
    ResolverError,
    VersionRejected,
)
from harness.suite.attention import LayerAttention

if TYPE_CHECKING:  # the lazy names below as the type checker reads them (`as`: exported)
    from harness.audit.config import load_draft_config as load_draft_config
    from harness.audit.contract import check_contract as check_contract
    from harness.audit.contract import expected_from_layers as expected_from_layers
    from harness.audit.contract import load_expected as load_expected
    from harness.audit.evaluate import VersionResult
    from harness.audit.evaluate import evaluate_sources as evaluate_sources
    from harness.audit.source import SGLangSource as SGLangSource
    from harness.audit.source import source_for_build as source_for_build
    from harness.audit.target import AuditTarget
    from harness.audit.target import load_target as load_target
    from harness.audit.wheels import SGLangSourceError as SGLangSourceError
    from harness.audit.wheels import fetch_wheels as fetch_wheels

_LAZY = {
    "SGLangSource": "harness.audit.source",
    "source_for_build": "harness.audit.source",
    "SGLangSourceError": "harness.audit.wheels",
    "fetch_wheels": "harness.audit.wheels",
    "load_draft_config": "harness.audit.config",
    "check_contract": "harness.audit.contract",
    "expected_from_layers": "harness.audit.contract",
    "load_expected": "harness.audit.contract",
    "evaluate_sources": "harness.audit.evaluate",
    "load_target": "harness.audit.target",
}

__all__ = [
    "VERSION_REJECTS",
    "AuditLimitError",
    "LayerAttention",
    "ResolverError",
    "VersionRejected",
    "audit_build",
    "audit_for_build",
    *_LAZY,
]


def __getattr__(name: str) -> object:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'harness.audit' has no attribute {name!r}")


def audit_for_build(
    config: Mapping[str, object] | str | os.PathLike[str],
    source: SGLangSource | str | os.PathLike[str] | None,
    transformers: str | None = None,
    revision: str | None = None,
) -> list[LayerAttention]:
    """The draft's per-layer attention as one SGLang build's own code resolves it (preflight).

    `config`: a config.json file, a checkpoint folder, a hub id (at `revision`), or a parsed
    config (written to a scratch folder as config.json). `source`: an SGLangSource, a
    checkout folder, a wheel or sdist, `installed`/None, or a spec like `sglang==0.5.23`.
    Raises VersionRejected (the version's code raised: version, exception type, message),
    DraftConfigError (unreadable / not JSON), SGLangSourceError, ResolverError, AuditLimitError.
    """
    result = audit_build(config, source, transformers, revision)
    if result.error is not None:
        raise VersionRejected(result.source.label, result.error.type, result.error.message,
                              result.error.stage, result.error.where)
    assert result.layers is not None
    return result.layers


def audit_build(
    config: Mapping[str, object] | str | os.PathLike[str],
    source: SGLangSource | str | os.PathLike[str] | None,
    transformers: str | None = None,
    revision: str | None = None,
    target: AuditTarget | None = None,
) -> VersionResult:
    """One build's whole answer on a draft (per-layer attention, or the error its code
    raised, and every other clause), against `target` when given (the preflight)."""
    from harness.audit.config import locate_draft_config, parse_config_text
    from harness.audit.evaluate import evaluate_sources
    from harness.audit.source import source_for_build

    build = source_for_build(source)
    if isinstance(config, Mapping):
        with tempfile.TemporaryDirectory(prefix="harness-draft-") as scratch:
            path = Path(scratch) / "config.json"
            path.write_text(json.dumps(config))
            [result] = evaluate_sources(path, [build], transformers, target=target)
        return result
    path, origin = locate_draft_config(config, revision)
    parse_config_text(path.read_text(encoding="utf-8"), origin)  # not JSON: exit 2
    [result] = evaluate_sources(path, [build], transformers, target=target)
    return result
