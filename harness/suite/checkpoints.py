"""The checkpoints a run serves: a suite's target and draft as named (a hub id, a path, an
environment variable) resolved with the command line's overrides (`Models`), and how a
suite names them for `harness show` and the dry run."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from harness.errors import BadInput
from harness.suite.schema import Suite
from harness.suite.serving import DRAFTLESS, EnvModel, ModelRef


def model_source(ref: ModelRef | None) -> str:
    """How a suite names a checkpoint, for `harness show` and the dry run."""
    if ref is None or ref.model is None:
        return "the reference engine's tiny checkpoints"
    if isinstance(ref.model, EnvModel) and ref.model.default:
        return f"${ref.model.env} when set, else {ref.model.default}"
    if isinstance(ref.model, EnvModel):
        return f"${ref.model.env} (no public id: set it, or pass --target-model/--draft-model)"
    return ref.model


def _resolve_one(ref: ModelRef | None, role: str, override: str | None,
                 environ: Mapping[str, str], suite_name: str) -> str | None:
    if override:
        return override
    if ref is None or ref.model is None:
        return None
    if isinstance(ref.model, EnvModel):
        value = environ.get(ref.model.env, "").strip() or (ref.model.default or "")
        if not value:
            raise BadInput(
                f"suite {suite_name}: the {role} model has no public id; it comes from "
                f"${ref.model.env}, which is not set (set it to a hub id or a local "
                f"path, or pass --{role}-model)")
        return value
    return ref.model


@dataclass(frozen=True)
class Models:
    """The target and draft a run serves, after environment/command-line overrides."""

    target: str
    draft: str | None  # None: an algorithm without a draft model (NGRAM)
    target_revision: str | None = None
    draft_revision: str | None = None



def resolve_models(suite: Suite, target: str | None = None, draft: str | None = None,
                   environ: Mapping[str, str] | None = None) -> Models | None:
    """The target and draft the run serves: command-line override, else the suite's id,
    else its environment variable. None for a reference suite that names no models."""
    environ = os.environ if environ is None else environ
    target_id = _resolve_one(suite.target, "target", target, environ, suite.name)
    draft_id = _resolve_one(suite.draft, "draft", draft, environ, suite.name)
    if suite.engine.kind == "sglang" and suite.speculative.algorithm in DRAFTLESS:
        if draft_id is not None:
            raise BadInput(f"suite {suite.name}: {suite.speculative.algorithm} uses no draft "
                           "model; --draft-model does not apply")
        if target_id is None:
            raise BadInput(f"suite {suite.name}: give --target-model")
        return Models(target_id, None, suite.target.revision if suite.target else None)
    if target_id is None or draft_id is None:
        if suite.engine.kind == "sglang" or (target_id or draft_id):
            raise BadInput(f"suite {suite.name}: give both --target-model and --draft-model")
        return None
    return Models(target_id, draft_id,
                  suite.target.revision if suite.target else None,
                  suite.draft.revision if suite.draft else None)
