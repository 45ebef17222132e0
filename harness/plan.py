"""The run plan: the build and models a run uses, the engine it prepares, the attention
contract it checks, what it may write (secrets redacted), and the `--dry-run` text.

Engine facts stay in the adapters (harness.engines); this module only asks them.
"""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness import build as builds
from harness.engines import EngineAdapter, Models, adapter_for
from harness.errors import BadInput, EngineError, HarnessError
from harness.preflight import Fit
from harness.record import BuildInfo, GPUInfo, LayerRow, Provenance
from harness.secrets import redact_argv, redact_env, redact_url
from harness.suite import (
    LoadedSuite,
    ReferenceEngine,
    SGLangEngine,
    Suite,
    document_sha256,
    model_source,
    resolve_models,
)

PORT_PLACEHOLDER = 30000
REFERENCE_BUILD_PREFIX = "reference:"
REFERENCE_GRAMMAR = "reference:policy=fixed|legacy|regressed[,noise=X]"


@dataclass
class PreparedEngine:
    suite: Suite
    build: BuildInfo
    python: str
    adapter: EngineAdapter
    models: Models | None  # what the server is asked to serve
    checkpoints: tuple[Path, Path] | None = None  # the reference engine's target, draft

    def command(self, host: str, port: int) -> list[str]:
        return self.adapter.launch_command(self.suite, self.python, host, port, self.models,
                                           self.checkpoints)

    @property
    def draft_config(self) -> str | None:
        """A config.json, checkpoint folder or hub id of the draft."""
        return self.models.draft if self.models else None

    @property
    def draft_revision(self) -> str | None:
        return self.models.draft_revision if self.models else None


def with_build_spec(loaded: LoadedSuite, spec: str | None) -> LoadedSuite:
    """Apply a build spec that is a reference-engine build (`reference:policy=...`): its
    values replace the suite's engine settings, and the recorded document shows them.

    A spec that does not apply to the suite's engine is bad input: `reference:...` on an
    SGLang suite, an SGLang build (pip requirement, git URL, checkout) on a reference suite.
    """
    if not spec:
        return loaded
    is_reference_spec = spec.startswith(REFERENCE_BUILD_PREFIX)
    if not isinstance(loaded.suite.engine, ReferenceEngine):
        if is_reference_spec:
            raise BadInput(f"build {spec!r} is a reference-engine build, but suite "
                           f"{loaded.suite.name} runs SGLang (give sglang==X, a git URL or a "
                           "checkout)")
        return loaded
    if not is_reference_spec:
        raise BadInput(f"build {spec!r} does not apply to suite {loaded.suite.name}, which runs "
                       f"the CPU reference engine; its builds are {REFERENCE_GRAMMAR}")
    keys = {"policy": "attention_policy", "noise": "draft_noise"}
    overrides: dict[str, Any] = {}
    for part in filter(None, spec.removeprefix(REFERENCE_BUILD_PREFIX).split(",")):
        key, _, value = part.partition("=")
        if key.strip() not in keys or not value:
            raise BadInput(f"build {spec!r}: expected {REFERENCE_GRAMMAR}")
        name = keys[key.strip()]
        overrides[name] = value.strip() if name == "attention_policy" else _number(value, spec)
    document = json.loads(json.dumps(loaded.document))
    document["engine"] = {**document["engine"], **overrides}
    try:
        suite = Suite.model_validate(document)
    except ValueError as error:
        raise BadInput(f"build {spec!r}: {error}") from None
    return LoadedSuite(suite=suite, path=loaded.path, sha256=document_sha256(document),
                       document=document)


def _number(value: str, spec: str) -> float:
    try:
        return float(value)
    except ValueError:
        raise BadInput(f"build {spec!r}: noise must be a number, got {value!r}") from None


def models(suite: Suite, options: Any) -> Models | None:
    """The models the run serves (exit 2 when a model with no public id is not given)."""
    return resolve_models(suite, options.target_model, options.draft_model)


def build_options(suite: Suite) -> dict[str, Any]:
    engine = suite.engine
    options: dict[str, Any] = {"num_draft_tokens": suite.speculative.draft_tokens,
                               "algorithm": suite.speculative.algorithm}
    if isinstance(engine, ReferenceEngine):
        options |= {"attention_policy": engine.attention_policy,
                    "draft_noise": engine.draft_noise}
    return options


def _reference_dirs() -> tuple[Path, Path]:
    from harness.engines.reference.checkpoints import checkpoint_dir

    root = checkpoint_dir(builds.cache_root())
    return root / "target", root / "draft"


def _sglang_spec(suite: Suite, options: Any) -> builds.BuildSpec:
    assert isinstance(suite.engine, SGLangEngine)
    spec = options.sglang
    if spec is None and builds.installed_version(sys.executable, "sglang")[0] is None:
        spec = suite.engine.default_build  # nothing installed here: test the suite's default
    return builds.parse_build_spec(spec, options.patch)


def prepare_engine(suite: Suite, options: Any, models: Models | None) -> PreparedEngine:
    """Make (or find) the engine's environment and checkpoints; the heavy part of a run."""
    adapter = adapter_for(suite.engine.kind)
    if isinstance(suite.engine, SGLangEngine):
        python, info = builds.prepare_sglang(_sglang_spec(suite, options))
        return PreparedEngine(suite, info, python, adapter, models)
    from harness.engines.reference.checkpoints import ensure_checkpoints

    python, info = builds.prepare_reference(options.engine_python)
    checkpoints = ((Path(models.target), Path(models.draft)) if models
                   else ensure_checkpoints(python, builds.cache_root()))
    return PreparedEngine(suite, info, python, adapter,
                          Models(str(checkpoints[0]), str(checkpoints[1])), checkpoints)


def attention_table(loaded: LoadedSuite, engine: PreparedEngine) -> list[LayerRow] | None:
    """The draft's per-layer attention as this build resolves it, before any launch.

    SGLang builds are evaluated from their own resolver source (`harness audit`);
    the reference engine replays the behaviour its suite names. Without an
    expected contract, an unreachable draft config only leaves the table empty.
    """
    suite = loaded.suite
    expected = suite.draft.expected_layers if suite.draft else None
    if engine.draft_config is None:
        return None
    try:
        if isinstance(suite.engine, ReferenceEngine):
            from harness.attention import resolve_layers
            from harness.audit import load_draft_config

            config, _ = load_draft_config(engine.draft_config)
            layers = resolve_layers(config, suite.engine.attention_policy)
        else:
            from harness.audit import audit_for_build, load_draft_config
            from harness.audit.source import checkout_source

            config, _ = load_draft_config(engine.draft_config, engine.draft_revision)
            layers = audit_for_build(config, checkout_source(_sglang_parent(engine.python)))
    except HarnessError:
        if expected is not None:
            raise
        return None
    return [LayerRow.model_validate(layer.to_dict()) for layer in layers]


def _sglang_parent(python: str) -> str:
    """The folder holding the engine environment's `sglang/` package, found without
    importing it (find_spec of a top-level package runs none of its code)."""
    import subprocess

    probe = ("import importlib.util, pathlib; s = importlib.util.find_spec('sglang'); "
             "print(pathlib.Path(list(s.submodule_search_locations)[0]).parent)")
    try:
        return subprocess.run([python, "-c", probe], capture_output=True, text=True,
                              timeout=60, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError) as error:
        raise EngineError(f"cannot locate sglang in {python}: {error}") from None


def contract_differences(suite: Suite, attention: Sequence[LayerRow] | None) -> list[str]:
    expected = suite.draft.expected_layers if suite.draft else None
    if expected is None or attention is None:
        return []
    from harness.attention import LayerAttention
    from harness.audit import check_contract

    actual = [LayerAttention(**row.model_dump(include={"index", "layer_type", "window",
                                                       "causal", "explicit"}))
              for row in attention]
    return check_contract([layer.model_dump() for layer in expected], actual)


def server_env(suite: Suite, fit: Fit | None) -> dict[str, str]:
    env = dict(suite.engine.env)
    if fit is not None and fit.devices:
        env["CUDA_VISIBLE_DEVICES"] = ",".join(str(d) for d in fit.devices)
    return env


# ---------------------------------------------------------------- what may be written


def secret_values(suite: Suite) -> tuple[str, ...]:
    """The suite's secrets (engine.env credentials, secret flags in extra_args)."""
    from harness.secrets import secret_values as find

    return find(suite.engine.env, suite.engine.extra_args)


def redact_command(command: Sequence[str], suite: Suite) -> list[str]:
    from harness.secrets import redact_text

    hidden = secret_values(suite)
    return [redact_text(arg, hidden) for arg in redact_argv(command)]


def redacted_document(loaded: LoadedSuite) -> dict[str, Any]:
    """The suite document as recorded: secret env values and flag values replaced."""
    document = json.loads(json.dumps(loaded.document))
    engine = document.get("engine")
    if isinstance(engine, dict):
        if isinstance(engine.get("env"), dict):
            engine["env"] = redact_env(engine["env"])
        if isinstance(engine.get("extra_args"), list):
            engine["extra_args"] = redact_argv([str(a) for a in engine["extra_args"]])
    return document


def provenance(loaded: LoadedSuite, engine: PreparedEngine | None, gpus: Sequence[GPUInfo],
               fit: Fit | None, data: Any) -> Provenance:
    from harness import provenance as collect

    used = [g for g in gpus if fit is not None and g.index in fit.devices]
    return collect.collect(engine.python if engine else None, used,
                           server_env(loaded.suite, fit),
                           getattr(data, "source", None), getattr(data, "sha256", None),
                           loaded.suite.workload.seed)


def draw_plot(run_dir: Path, results_dir: Path) -> Path | None:
    """The run against its suite's baselines and floor; a failed plot never fails a run."""
    try:
        from harness import plots

        return plots.plot_run(run_dir, results_root=results_dir)
    except Exception as error:  # plotting is a by-product; the record is already written
        print(f"warning: could not draw the plot for {run_dir}: {error}", file=sys.stderr)
        return None


# ---------------------------------------------------------------- the dry run


def _dry_run_command(suite: Suite, options: Any) -> list[str]:
    adapter = adapter_for(suite.engine.kind)
    if isinstance(suite.engine, SGLangEngine):
        build = _sglang_spec(suite, options)
        python = (sys.executable if build.kind == "installed"
                  else str(builds.cache_root() / "envs" / f"sglang-{build.key}" / "bin" / "python"))
        try:
            chosen = models(suite, options)
        except BadInput:  # a model from an unset variable: show where it would come from
            chosen = Models(_placeholder(suite.target), _placeholder(suite.draft),
                            suite.target.revision if suite.target else None,
                            suite.draft.revision if suite.draft else None)
        return adapter.launch_command(suite, python, "127.0.0.1", PORT_PLACEHOLDER, chosen)
    chosen = models(suite, options)
    dirs = (Path(chosen.target), Path(chosen.draft)) if chosen else _reference_dirs()
    python = options.engine_python or sys.executable
    return adapter.launch_command(suite, python, "127.0.0.1", PORT_PLACEHOLDER, None, dirs)


def _placeholder(ref: Any) -> str:
    model = getattr(ref, "model", None)
    return f"${model.env}" if hasattr(model, "env") else str(model)


def describe(loaded: LoadedSuite, options: Any, fit: Fit) -> list[str]:
    """What a run of this suite does, for `--dry-run` and for a skipped run."""
    from harness.suite import METRIC_DEFINITIONS

    suite, workload = loaded.suite, loaded.suite.workload
    floors = suite.floors
    relation = ">" if floors.strict else ">="
    lines = [
        f"suite      {suite.name} ({loaded.path}, sha256 {loaded.sha256[:12]})",
        f"topology   {fit.reason}",
        f"launch     {shlex.join(redact_command(_dry_run_command(suite, options), suite))}",
        f"           (port {PORT_PLACEHOLDER} stands for a free port chosen at launch)",
    ]
    if suite.engine.kind == "sglang":
        lines += [f"target     {model_source(suite.target)}",
                  f"draft      {model_source(suite.draft)}"]
    lines += [
        f"workload   GSM8K run_eval protocol: {workload.shots} shots, questions "
        f"{workload.shots}..{workload.shots + workload.questions - 1} of test.jsonl, "
        f"max_tokens {workload.max_tokens}, temperature {workload.temperature:g}, "
        f"top_p {workload.top_p:g}, concurrency {workload.concurrency}, seed {workload.seed}",
        f"           {workload.warmup_requests} warm-up requests, then /flush_cache, "
        "then POST /generate per question",
        f"metric     {floors.metric}: {METRIC_DEFINITIONS[floors.metric]}",
        f"floors     accept length ({floors.metric}) {relation} {floors.accept_length:g}"
        + (f", accuracy {relation} {floors.accuracy:g}" if floors.accuracy is not None else ""),
    ]
    lines += [f"baseline   {b.label}: {b.accept_length:g} ({b.metric or floors.metric}, "
              f"{'external' if b.external else 'measured here'}) {redact_url(b.source)}"
              for b in suite.baselines]
    if suite.draft and suite.draft.expected_layers:
        contract = ", ".join(
            ("causal" if layer.causal else "bidirectional")
            + (f"/w{layer.window}" if layer.window else "")
            for layer in suite.draft.expected_layers)
        lines.append(f"contract   draft layers: {contract}")
    return lines

