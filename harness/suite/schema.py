"""The suite's top level: `Suite` (the parts from `harness.suite.serving` and
`harness.suite.entries`, with the checks that span them) and `LoadedSuite` (a validated
suite with its path and the hash of its document)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from harness.speculation.bounds import StepBound, step_bound
from harness.suite.definition_rows import missing_counts
from harness.suite.document import DocumentError, check_values
from harness.suite.entries import (
    INHERITED_FLOOR_KEYS,
    Baseline,
    Floors,
    GSM8KWorkload,
    Workload,
    WorkloadEntry,
    impossible,
    known_categories,
)
from harness.suite.forced import ForcedSetting
from harness.suite.gate import Gate
from harness.suite.grid import Grid, engine_problem
from harness.suite.local_models import context_limit, max_tokens_problem
from harness.suite.protocol_checks import EntryParts, check_entry
from harness.suite.serving import (
    DRAFTLESS,
    DraftRef,
    Engine,
    ModelRef,
    Speculative,
    Strict,
    Topology,
)
from harness.suite.soak import Soak
from harness.suite.speedup import SPEEDUP_FLOOR_KEYS, SpeedupSetting

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
    # Speculation against the target alone (harness.suite.speedup): None, no baseline run.
    speedup: SpeedupSetting | None = None
    # The workload grid (harness.suite.grid): `harness grid SUITE` measures every cell.
    grid: Grid | None = None
    # Drift over serving time (harness.suite.soak): `harness soak`'s duration, windows, gate.
    soak: Soak | None = None
    # The tolerances of `harness forced --against` (harness.suite.forced): None, no split.
    forced: ForcedSetting | None = None

    @model_validator(mode="before")
    @classmethod
    def _values_within_limits(cls, data: Any) -> Any:
        """No depth, infinity, NaN or integer past 64 bits anywhere (harness.suite.document):
        also for a document changed after it was read (a build's settings, a question
        count), which is validated again."""
        try:
            check_values(data)
        except DocumentError as error:
            raise impossible(error.field or "(document)", error.problem) from None
        return data

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
    def _speedup_floors_need_a_baseline(self) -> Suite:
        """A speedup floor is judged on a figure only a baseline run gives; a baseline is
        launched by the harness, which launches no prefill/decode split."""
        for floors, where in [(self.floors, "floors"),
                              *((e.floors, f"workloads.{e.name}.floors") for e in self.workloads)]:
            for key in SPEEDUP_FLOOR_KEYS:
                if getattr(floors, key) is not None and self.speedup is None:
                    raise impossible(f"{where}.{key}",
                                     "a speedup floor needs a baseline to measure against: "
                                     "declare [speedup] baseline = \"target_only\"")
        if self.speedup is not None and self.topology.disaggregation is not None:
            raise impossible("speedup.baseline",
                             "the harness launches no prefill/decode split, so it cannot "
                             "launch its target alone; remove [speedup]")
        return self

    @model_validator(mode="after")
    def _grid_fits_the_engine(self) -> Suite:
        """The grid's prefix-caching axis needs the engine's own flag; a cell at the
        workload's concurrency needs that many questions."""
        if self.grid is None:
            return self
        problem = engine_problem(self.grid, self.engine.kind, list(self.engine.extra_args))
        if problem is not None:
            raise impossible(*problem)
        if self.grid.speedup_max_drop is not None and self.speedup is None:
            raise impossible("grid.speedup_max_drop", "no speedup to gate: the suite has no "
                             "[speedup] (baseline = \"target_only\"), so no cell measures "
                             "the target alone")
        if not self.grid.concurrency and self.workload.concurrency > self.grid.questions:
            raise impossible("grid.questions", f"{self.grid.questions} questions per cell "
                             f"cannot keep workload.concurrency = {self.workload.concurrency} "
                             "in flight: set grid.concurrency or more questions")
        return self

    @property
    def step_bound(self) -> StepBound:
        """The most one verify step of this suite's settings can make
        (harness.speculation.bounds)."""
        spec = self.speculative
        return step_bound(spec.algorithm, spec.draft_tokens, spec.num_steps, spec.eagle_topk,
                          self.engine.kind)

    @model_validator(mode="after")
    def _definitions_computable(self) -> Suite:
        """Each definition the suite gates or compares in, one its runs' rows can give on
        this engine and route (harness.suite.definition_rows)."""
        declared = [(self.workload, self.floors, self.baselines, ""),
                    *((e, e.floors, e.baselines, f"workloads.{e.name}.") for e in self.workloads)]
        for workload, floors, baselines, where in declared:
            fields = [(f"{where}floors.metric", floors.metric),
                      *((f"{where}baselines.{i}.metric", b.metric)
                        for i, b in enumerate(baselines) if b.metric and not b.protocol)]
            if not where and self.gate is not None and self.gate.metric:
                fields.append(("gate.metric", self.gate.metric))
            for field, metric in fields:
                missing = missing_counts(self.engine.kind, workload.protocol,
                                         getattr(self.engine, "default_build", ""), metric)
                if missing is not None:
                    counts, why = missing
                    raise impossible(field, f"{metric!r} needs each request's {counts}, which "
                                            f"this suite's runs cannot record: {why}")
        return self

    @model_validator(mode="after")
    def _protocols_and_references(self) -> Suite:
        """Each entry as the protocol it reproduces fixes it; each cited reference of its
        pair, protocol and definition (harness.suite.protocol_checks)."""
        entries = [EntryParts(self.workload, self.floors, self.baselines, "", "workload."),
                   *(EntryParts(e, e.floors, e.baselines, f"workloads.{e.name}.",
                                f"workloads.{e.name}.") for e in self.workloads)]
        for parts in entries:
            check_entry(parts, self.target, self.draft)
        return self

    @model_validator(mode="after")
    def _figures_possible(self) -> Suite:
        """No floor or baseline above the most a verify step can make, in the definition
        the floors are in; no position floor past the drafts a step can accept."""
        bound = self.step_bound
        for floors, baselines, where in [(self.floors, self.baselines, ""),
                                         *((e.floors, e.baselines, f"workloads.{e.name}.")
                                           for e in self.workloads)]:
            top = bound.accept_length(floors.metric)
            why = bound.accept_reason(floors.metric)
            figures = [(f"{where}floors.accept_length", floors.accept_length, floors.strict),
                       *((f"{where}floors.categories.{name}.accept_length", c.accept_length,
                          c.strict) for name, c in floors.categories.items())]
            for field, floor, strict in figures:
                if floor is not None and (floor > top or (strict and floor >= top)):
                    rule = "must exceed" if strict else "must reach"
                    raise impossible(field, f"a run {rule} {floor:g}, but {why}")
            for i, baseline in enumerate(baselines):
                if baseline.accept_length > top:
                    raise impossible(f"{where}baselines.{i}.accept_length",
                                     f"{baseline.accept_length:g} was never measured: {why}")
            if len(floors.positions) > bound.drafts:
                raise impossible(f"{where}floors.positions",
                                 f"{len(floors.positions)} position floors, but {bound.reason}"
                                 f", so a step accepts at most {bound.drafts} drafts: "
                                 f"positions past {bound.drafts} never exist")
        return self

    @model_validator(mode="after")
    def _max_tokens_within_the_context(self) -> Suite:
        """`max_tokens` leaves room for a prompt in the target's context: the one its local
        config declares (harness.suite.local_models), else `MAX_CONTEXT_TOKENS`. A target
        given at run time (a variable, --target-model) is checked by the run."""
        model = self.target.model if self.target is not None else None
        name = model if isinstance(model, str) else getattr(model, "default", None)
        try:
            context = context_limit(name)
        except DocumentError as error:
            raise impossible("target.model", str(error)) from None
        for workload, field in [(self.workload, "workload.max_tokens"),
                                *((e, f"workloads.{e.name}.max_tokens")
                                  for e in self.workloads)]:
            problem = max_tokens_problem(workload.max_tokens, context)
            if problem:
                raise impossible(field, problem)
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
    """A validated suite with where it came from and a hash of its document.

    `document` and `sha256` are the suite's identity: what its records keep and what its
    history is grouped by. `suite` is the suite as served: a run's reference build may set
    its engine settings (`harness.run.plan.choose_build`) without changing that identity.
    """

    model_config = ConfigDict(frozen=True)

    suite: Suite
    path: Path
    sha256: str
    document: dict[str, object]


def document_sha256(document: dict[str, object]) -> str:
    """Hash of the parsed document: stable across whitespace and comment edits."""
    canonical = json.dumps(document, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()
