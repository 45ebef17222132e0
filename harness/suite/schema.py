"""The suite's top level: `Suite` (the parts from `harness.suite.serving` and
`harness.suite.entries`, with the checks that span them) and `LoadedSuite` (a validated
suite with its path and the hash of its document)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from harness.suite.entries import (
    INHERITED_FLOOR_KEYS,
    Baseline,
    Floors,
    GSM8KWorkload,
    Workload,
    WorkloadEntry,
    known_categories,
)
from harness.suite.gate import Gate
from harness.suite.serving import (
    DRAFTLESS,
    DraftRef,
    Engine,
    ModelRef,
    Speculative,
    Strict,
    Topology,
)

NAME_PATTERN = r"^[a-z0-9][a-z0-9_\-]*$"


class Suite(Strict):
    name: str = Field(pattern=NAME_PATTERN)
    description: str = ""
    nightly: bool = False
    engine: Engine
    target: ModelRef | None = None
    draft: DraftRef | None = None
    speculative: Speculative = Speculative()
    topology: Topology
    workload: Workload = GSM8KWorkload()
    floors: Floors
    baselines: list[Baseline] = Field(default_factory=list)
    # The paired relative gate against a reference build (harness.suite.gate).
    gate: Gate | None = None
    # Further workloads on the same server (e.g. the same prompts at temperature 0.6),
    # each with its own floors; each is recorded as its own series `<name>.<entry>`.
    workloads: list[WorkloadEntry] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _entries_inherit_the_floor_definition(cls, data: Any) -> Any:
        """An entry's floors take `metric`, `alpha` and `beta` from `[floors]` unless set:
        its figures are in the suite's definition unless it says otherwise."""
        if not isinstance(data, dict) or not isinstance(data.get("floors"), dict):
            return data
        entries = data.get("workloads")
        if not isinstance(entries, list):
            return data
        base = {k: data["floors"][k] for k in INHERITED_FLOOR_KEYS if k in data["floors"]}
        merged = []
        for entry in entries:
            if isinstance(entry, dict) and isinstance(entry.get("floors"), dict):
                entry = {**entry, "floors": {**base, **entry["floors"]}}
            merged.append(entry)
        return {**data, "workloads": merged}

    @model_validator(mode="after")
    def _entry_names_unique(self) -> Suite:
        names = [entry.name for entry in self.workloads]
        if len(set(names)) != len(names):
            raise ValueError(f"workload entry names must be unique: {names}")
        return self

    @model_validator(mode="after")
    def _category_floors_exist(self) -> Suite:
        for workload, floors, where in [(self.workload, self.floors, "floors"),
                                        *((e, e.floors, f"workloads.{e.name}.floors")
                                          for e in self.workloads)]:
            known = known_categories(workload)
            unknown = [c for c in floors.categories if known is not None and c not in known]
            if unknown:
                raise ValueError(f"{where}.categories: {unknown} are not categories of this "
                                 f"{workload.kind} workload; it has {sorted(known or [])}")
        return self

    @model_validator(mode="after")
    def _baselines_in_the_floors_metric(self) -> Suite:
        # A floor is only meaningful in the definition of the figure it came from.
        for baselines, floors in [(self.baselines, self.floors),
                                  *((e.baselines, e.floors) for e in self.workloads)]:
            for baseline in baselines:
                if baseline.metric is not None and baseline.metric != floors.metric:
                    raise ValueError(
                        f"baseline {baseline.label!r} is in metric {baseline.metric!r} but "
                        f"the floors use {floors.metric!r}; give its figure in the floors' "
                        "definition")
        return self

    @model_validator(mode="after")
    def _gate_in_the_floors_metric(self) -> Suite:
        # A tolerance means something only in the definition of the figure it came from.
        if self.gate is None or self.gate.metric is None:
            return self
        for floors, where in [(self.floors, "floors"),
                              *((e.floors, f"workloads.{e.name}.floors") for e in self.workloads)]:
            if floors.metric != self.gate.metric:
                raise ValueError(f"gate.metric {self.gate.metric!r} differs from {where}.metric "
                                 f"{floors.metric!r}: the tolerated drop is taken in the "
                                 "floors' definition")
        return self

    @model_validator(mode="after")
    def _models_for_engine(self) -> Suite:
        models = [ref.model if ref else None for ref in (self.target, self.draft)]
        if self.engine.kind == "sglang" and self.speculative.algorithm in DRAFTLESS:
            # NGRAM drafts from the prompt's own n-grams (sglang/srt/speculative/ngram_worker.py)
            if models[0] is None:
                raise ValueError("an sglang suite needs [target] with `model`")
            if models[1] is not None:
                raise ValueError(f"speculative.algorithm {self.speculative.algorithm} uses no "
                                 "draft model: remove [draft].model")
            return self
        if self.engine.kind == "sglang" and None in models:
            raise ValueError("an sglang suite needs [target] and [draft] with `model`")
        if self.engine.kind in ("reference", "vllm") and models.count(None) == 1:
            raise ValueError(f"a {self.engine.kind} suite names both target and draft models, or "
                             "neither (then the built tiny checkpoints are used)")
        return self


class LoadedSuite(BaseModel):
    """A validated suite with where it came from and a hash of its document."""

    model_config = ConfigDict(frozen=True)

    suite: Suite
    path: Path
    sha256: str
    document: dict[str, Any]


def document_sha256(document: dict[str, Any]) -> str:
    """Hash of the parsed document: stable across whitespace and comment edits."""
    canonical = json.dumps(document, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()
