"""The run plan: the build and models a run uses, the engine it prepares and the server's
environment; the `--dry-run` text is `harness.run.dry_run`'s, the draft's attention and
its contract `harness.run.draft_attention`'s, what a run may write (secrets redacted,
provenance, the plot) `harness.run.recorded`'s.

Engine facts stay in the adapters (harness.engines); this module only asks them.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from harness import builds
from harness.engines.interface import EngineAdapter, Placement
from harness.engines.registry import adapter_for
from harness.errors import BadInput
from harness.results.record import BuildInfo
from harness.run.checkpoint_folder import check_folder
from harness.run.preflight import Fit
from harness.suite.checkpoints import Models, resolve_models
from harness.suite.document import DocumentError
from harness.suite.local_models import (
    context_limit,
    find_local,
    max_tokens_problem,
    named_as_path,
)
from harness.suite.model import Entry, LoadedSuite, Suite, VLLMEngine, suite_entries
from harness.suite.release_patches import patch_files
from harness.suite.serving import ReferenceEngine, SGLangEngine
from harness.workloads.grid_data import check_grid_data
from reference_engine.causal_draft import causal_draft
from reference_engine.checkpoints import default_dirs, ensure_checkpoints, uniform_draft

if TYPE_CHECKING:
    from harness.run.outcome import RunOptions


class ServedEngine(Protocol):
    """What measuring a server reads of its engine: the adapter that speaks to it and the
    models it was asked to serve (a `PreparedEngine`, or `harness.run.attach`'s engine
    for a server nobody here launched)."""

    @property
    def adapter(self) -> EngineAdapter: ...

    @property
    def models(self) -> Models | None: ...


@dataclass
class PreparedEngine:
    suite: Suite
    build: BuildInfo
    python: str
    adapter: EngineAdapter
    models: Models | None  # what the server is asked to serve
    checkpoints: tuple[Path, Path] | None = None  # the reference engine's target, draft
    facts: builds.EnvironmentFacts | None = None  # the engine environment, probed once

    def command(self, host: str, port: int, placement: Placement | None = None) -> list[str]:
        return self.adapter.launch_command(self.suite, self.python, host, port, self.models,
                                           self.checkpoints, placement)

    @property
    def draft_config(self) -> str | None:
        """A config.json, checkpoint folder or hub id of the draft."""
        return self.models.draft if self.models else None

    @property
    def draft_revision(self) -> str | None:
        return self.models.draft_revision if self.models else None


@dataclass(frozen=True)
class ChosenBuild:
    """The build a run tests: the parsed spec, and for a reference-engine build the
    settings it changes (inline, or read from a repository at a commit)."""

    spec: builds.BuildSpec
    reference: builds.ReferenceBuild | None = None


def check_suite(loaded: LoadedSuite) -> None:
    """Every check a run's preparation makes on the suite alone (BadInput naming the first
    that fails): its workload entries, each entry's engine flags as its adapter checks
    them. `harness validate` runs it; so does a run, before any work. (The default build
    is not checked: a run uses it only on a host with no SGLang installed.)"""
    for ref in (loaded.suite.target, loaded.suite.draft):
        model = getattr(ref, "model", None)
        name = getattr(model, "default", None) or (model if isinstance(model, str) else "")
        if name.startswith("tiny:") and name not in TINY_MODELS:
            raise BadInput(f"suite {loaded.suite.name}: model {name!r}: the harness makes no "
                           f"such checkpoint; known: {', '.join(sorted(TINY_MODELS))}")
    test_patch_files(loaded.suite)  # a missing test patch: exit 2 before any work
    if loaded.suite.grid is not None:  # a cell the data cannot make: exit 2, naming the field
        check_grid_data(loaded.suite.grid, loaded.suite.workload.concurrency)
    for entry in suite_entries(loaded):
        check = getattr(adapter_for(entry.loaded.suite.engine.kind), "check_flags", None)
        if check is not None:  # an adapter that owns no flag has nothing to check
            check(entry.loaded.suite)


def requested_spec(suite: Suite, spec: str | None, patch: Path | None) -> str | None:
    """The build spec a run names: `--sglang`/`--build`, else with `--patch` the suite's
    `engine.default_build` (a patch needs a build to apply to, and the suite names one)."""
    if spec is None and patch is not None and isinstance(suite.engine, SGLangEngine):
        return suite.engine.default_build
    return spec


def choose_build(loaded: LoadedSuite, options: RunOptions) -> tuple[LoadedSuite, ChosenBuild]:
    """Parse the run's build spec against the suite's engine (exit 2 when it does not
    parse or does not apply) and apply a reference build's settings to the suite served.

    The suite's document and hash stay the file's: the build under test is recorded in
    the record's build section (its spec, and its settings in `build.options`), never in
    the suite's identity, so a suite's history spans builds and a step from one build to
    the next is what `harness trend` and the site show."""
    suite = loaded.suite
    if isinstance(suite.engine, SGLangEngine):
        spec = requested_spec(suite, options.sglang, options.patch)
        engine_python = getattr(options, "engine_python", None)
        if engine_python is not None:
            if options.sglang is not None or options.patch is not None:
                raise BadInput("--engine-python names an installed SGLang; it does not go "
                               "with --sglang or --patch (they name a build to make)")
            return loaded, ChosenBuild(builds.parse_build_spec(None, engine="sglang"))
        if spec is None and builds.probe_environment(sys.executable).sglang_version is None:
            spec = suite.engine.default_build  # nothing installed here: the suite's default
        return loaded, ChosenBuild(builds.parse_build_spec(spec, options.patch, engine="sglang"))
    if isinstance(suite.engine, VLLMEngine):
        spec = options.sglang
        if spec is None and options.patch is None and \
                builds.vllm_version(builds.probe_environment(sys.executable).versions) is None:
            spec = suite.engine.default_build
        return loaded, ChosenBuild(builds.parse_build_spec(spec, options.patch, engine="vllm",
                                                           flag="--build"))
    build = builds.parse_build_spec(options.sglang, options.patch, engine="reference")
    reference = builds.resolve_reference_build(build)
    if not reference.overrides:
        return loaded, ChosenBuild(build, reference)
    document = json.loads(json.dumps(loaded.document))
    document["engine"] = {**document["engine"], **reference.overrides}
    try:
        served = Suite.model_validate(document)
    except ValueError as error:
        raise BadInput(f"build {build.text!r}: {error}") from None
    return loaded.model_copy(update={"suite": served}), ChosenBuild(build, reference)


def models(suite: Suite, options: RunOptions) -> Models | None:
    """The models the run serves (exit 2 when a model with no public id is not given).
    A checkpoint the harness makes itself (`tiny:causal`) is made into the cache here
    (milliseconds; a dry run makes it too, so that its printed line runs as pasted)."""
    chosen = resolve_models(suite, options.target_model, options.draft_model)
    if chosen is None:
        return None
    return dataclasses.replace(
        chosen, target=local_model(tiny_model(chosen.target)),
        draft=local_model(tiny_model(chosen.draft)) if chosen.draft else None)


def local_model(name: str) -> str:
    """A relative folder made absolute, found from the working folder, else from the
    repository root (as stand-ins are), so the server and a pasted dry-run line find it
    from anywhere; anything else as given (a hub id, or a path `check_models` refuses)."""
    found = find_local(name)
    return str(found) if found is not None else name


def check_models(chosen: Models | None) -> None:
    """A model named as a local path must exist, and a local folder must agree with itself
    (`checkpoint_folder`): exit 2 before any build or download."""
    for role, name in (("target", chosen.target if chosen else None),
                       ("draft", chosen.draft if chosen else None)):
        if name and named_as_path(name) and not Path(name).expanduser().exists():
            raise BadInput(f"the {role} model {name}: no such file or folder (a local path; "
                           f"a hub id is org/name); give --{role}-model or fix the suite")
        if name and Path(name).expanduser().is_dir():
            check_folder(Path(name).expanduser(), role)


def check_context(entries: Sequence[Entry], chosen: Models | None) -> None:
    """Each entry's `max_tokens` within the context of the target served, when that is a
    local checkpoint (one given by a variable or `--target-model`; the suite's own was
    checked when it loaded): exit 2 before any build."""
    if chosen is None:
        return
    try:
        context = context_limit(chosen.target)
    except DocumentError as error:
        raise BadInput(f"the target model {chosen.target}: {error}") from None
    for entry in entries:
        problem = max_tokens_problem(entry.loaded.suite.workload.max_tokens, context)
        if problem:
            where = "workload" if entry.name is None else f"workloads.{entry.name}"
            raise BadInput(f"suite {entry.loaded.suite.name}: {where}.max_tokens: {problem}")


def _causal() -> Path:
    return causal_draft()


# Checkpoints the harness makes bit for bit into its cache, by the name a suite gives
# them (`model = { env = "VAR", default = "tiny:causal" }`): name -> maker -> folder
TINY_MODELS: dict[str, Callable[[], Path]] = {"tiny:causal": _causal}


def tiny_model(name: str) -> str:
    """`name` itself, or for a `tiny:` name the folder of the checkpoint it names."""
    if not name.startswith("tiny:"):
        return name
    if name not in TINY_MODELS:
        raise BadInput(f"no checkpoint the harness makes is called {name!r}; known: "
                       f"{', '.join(sorted(TINY_MODELS))}")
    return str(TINY_MODELS[name]())


def build_options(suite: Suite) -> dict[str, object]:
    engine = suite.engine
    options: dict[str, object] = {"num_draft_tokens": suite.speculative.draft_tokens,
                               "algorithm": suite.speculative.algorithm}
    if isinstance(engine, ReferenceEngine):
        options |= {"attention_policy": engine.attention_policy,
                    "draft_noise": engine.draft_noise}
    return options


def served_dirs(models: Models) -> tuple[Path, Path]:
    """The target and draft folders a reference-engine run serves (`resolve_models` leaves
    the draft out only for SGLang's draftless algorithms)."""
    if models.draft is None:
        raise BadInput("the reference engine serves a draft model: give --draft-model")
    return Path(models.target), Path(models.draft)


def reference_dirs() -> tuple[Path, Path]:
    return default_dirs(builds.cache_root())


def prepare_engine(suite: Suite, options: RunOptions, models: Models | None,
                   chosen: ChosenBuild) -> PreparedEngine:
    """Make (or find) the engine's environment and checkpoints; the heavy part of a run."""
    adapter = adapter_for(suite.engine.kind)
    if isinstance(suite.engine, SGLangEngine):
        if chosen.spec.release is not None:  # no test patch for it: exit 2 before building
            test_patch_files(suite, chosen.spec.release)
        prepared = builds.prepare(chosen.spec, python=options.engine_python,
                                  test_patches=lambda release: test_patch_files(suite, release))
        return PreparedEngine(suite, prepared.info, prepared.python, adapter, models,
                              facts=prepared.facts)
    if isinstance(suite.engine, VLLMEngine):
        prepared = builds.prepare_vllm(chosen.spec)
        served = models or vllm_tiny_models(suite.engine)
        return PreparedEngine(suite, prepared.info, prepared.python, adapter, served,
                              facts=prepared.facts)
    prepared = builds.prepare_reference_env(options.engine_python, chosen.reference)
    checkpoints = (served_dirs(models) if models
                   else ensure_checkpoints(prepared.python, builds.cache_root()))
    if not models and suite.engine.tiny_draft != "shipped":
        checkpoints = uniform_draft(suite.engine.tiny_draft)
    return PreparedEngine(suite, prepared.info, prepared.python, adapter,
                          Models(str(checkpoints[0]), str(checkpoints[1])), checkpoints,
                          prepared.facts)


def vllm_tiny_models(engine: VLLMEngine) -> Models:
    """The shipped tiny target and the uniform-layer copy of its DFlash draft."""
    target, draft = uniform_draft(engine.tiny_draft)
    return Models(str(target), str(draft))


def _suite_paths(suite: Suite, key: str, what: str, exists: Callable[[Path], bool]) -> list[Path]:
    """`engine.<key>` of the suite, absolute (relative ones from the repository root);
    one that `exists` refuses is exit 2 naming it."""
    paths = [Path(f) if Path(f).is_absolute() else builds.REPO_ROOT / f
             for f in getattr(suite.engine, key, [])]
    missing = [str(f) for f in paths if not exists(f)]
    if missing:
        raise BadInput(f"suite {suite.name}: engine.{key}: no such {what} "
                       f"{', '.join(missing)}")
    return paths


def stand_in_folders(suite: Suite) -> list[Path]:
    """The suite's stand-in folders (test-only), absolute."""
    return _suite_paths(suite, "stand_ins", "folder", Path.is_dir)


def test_patch_files(suite: Suite, release: str | None = None) -> list[Path]:
    """The suite's test-only patches for a build of `release`, absolute (`{version}` in
    an entry is the release; checked alone, a suite needs a file for some release)."""
    return patch_files(getattr(suite.engine, "test_patches", []), builds.REPO_ROOT, release,
                       f"suite {suite.name}: engine.test_patches")


def server_env(suite: Suite, fit: Fit | None,
               facts: builds.EnvironmentFacts | None = None,
               build_env: dict[str, str] | None = None) -> dict[str, str]:
    """The server's environment: what its adapter and its build need (SGLang's CPU engine
    switch, from the build note; `build_env` for a build not made yet), then the suite's
    engine.env, then the stand-ins first on PYTHONPATH."""
    installed = ((facts.build_note or {}).get("installed") or {}) if facts else {}
    # what the adapter needs the server to have (vLLM: its /server_info route), what the
    # build needs, then the suite's own variables
    env = {**getattr(adapter_for(suite.engine.kind), "launch_env", {}),
           **installed.get("engine_env", build_env or {}), **suite.engine.env}
    folders = [str(f) for f in stand_in_folders(suite)] if isinstance(
        suite.engine, SGLangEngine) else []
    patched = getattr(facts, "patched_tree", None)  # the build's patched sglang
    if patched:
        folders.append(patched)
    if folders:
        env["PYTHONPATH"] = ":".join([*folders, *filter(None, [env.get("PYTHONPATH")])])
    if fit is not None and fit.devices:
        env["CUDA_VISIBLE_DEVICES"] = ",".join(str(d) for d in fit.devices)
    return env
