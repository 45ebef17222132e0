"""`harness audit`: a draft's per-layer attention under every known SGLang behaviour and
under one SGLang version's own resolver code, checked against an expected contract.

Light to import (stdlib only here); `rich` is imported only when a table is printed.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.attention import LayerAttention, read_fields
from harness.audit.config import load_draft_config
from harness.audit.contract import check_contract, expected_from_layers, load_expected
from harness.audit.evaluate import ResolverError, evaluate, extract_resolver
from harness.audit.source import (
    SGLangSource,
    SGLangSourceError,
    archive_source,
    checkout_source,
    fetch_wheels,
    installed_source,
    spec_source,
)

__all__ = [
    "LayerAttention",
    "ResolverError",
    "SGLangSource",
    "SGLangSourceError",
    "audit_for_build",
    "check_contract",
    "expected_from_layers",
    "fetch_wheels",
    "load_draft_config",
    "load_expected",
    "source_for_build",
]


def source_for_build(build: SGLangSource | str | os.PathLike[str] | None) -> SGLangSource:
    """An engine build as resolver source: an SGLangSource, a checkout folder, a wheel or
    sdist file, `installed` or None (the installed package), or a spec like `sglang==0.5.23`."""
    if isinstance(build, SGLangSource):
        return build
    if build is None or str(build) == "installed":
        return installed_source()
    path = Path(build).expanduser()
    if path.is_dir():
        return checkout_source(path)
    if path.is_file():
        return archive_source(path)
    return spec_source(str(build))


def audit_for_build(
    config: Mapping[str, Any] | str | os.PathLike[str],
    source: SGLangSource | str | os.PathLike[str] | None,
) -> list[LayerAttention]:
    """The draft's per-layer attention under one SGLang build's own resolver (for preflight).

    `config` is a parsed config.json, or a file, folder or hub id to load it from.
    Raises DraftConfigError / SGLangSourceError / ResolverError (all BadInput).
    """
    if not isinstance(config, Mapping):
        config, _ = load_draft_config(config)
    read_fields(config)
    return evaluate(extract_resolver(source_for_build(source)), config)
