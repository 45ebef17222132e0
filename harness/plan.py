"""The run plan: the engine environment, its launch line, the attention contract,
the server's environment, provenance, and the text `--dry-run` prints.

Glue between the stages, kept out of `runner` so that the runner reads as the
pipeline and each decision here can be tested alone.
"""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness import build as builds
from harness.engines import reference_launch, sglang
from harness.errors import BadInput, EngineError, HarnessError
from harness.preflight import Fit
from harness.record import BuildInfo, GPUInfo, LayerRow, Provenance
from harness.suite import LoadedSuite, ReferenceEngine, SGLangEngine, Suite, document_sha256

PORT_PLACEHOLDER = 30000


@dataclass
class PreparedEngine:
    build: BuildInfo
    python: str
    command: Callable[[str, int], list[str]]  # (host, port) -> argv
    draft_config: str | None  # a config.json, checkpoint folder or hub id
    draft_revision: str | None = None


REFERENCE_BUILD_PREFIX = "reference:"


def with_reference_build(loaded: LoadedSuite, spec: str | None) -> LoadedSuite:
    """A reference suite run as another "build": `reference:policy=regressed,noise=0.1`.

    The reference engine's builds are the SGLang behaviours it replays and its draft
    degradation; the suite document recorded with the run shows the values used. Other
    specs (SGLang builds, e.g. from a nightly that passes one to every suite) leave a
    reference suite as it is.
    """
    if not isinstance(loaded.suite.engine, ReferenceEngine) or not spec or \
            not spec.startswith(REFERENCE_BUILD_PREFIX):
        return loaded
    keys = {"policy": "attention_policy", "noise": "draft_noise"}
    overrides: dict[str, Any] = {}
    for part in filter(None, spec.removeprefix(REFERENCE_BUILD_PREFIX).split(",")):
        key, _, value = part.partition("=")
        if key.strip() not in keys or not value:
            raise BadInput(f"build {spec!r}: expected reference:policy=fixed|legacy|regressed"
                           ",noise=X")
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


def _own_models(suite: Suite) -> tuple[Path, Path] | None:
    """A reference suite's own checkpoint folders, when it names them."""
    if suite.target and suite.target.model and suite.draft and suite.draft.model:
        return Path(suite.target.model), Path(suite.draft.model)
    return None


def _sglang_spec(suite: Suite, options: Any) -> builds.BuildSpec:
    assert isinstance(suite.engine, SGLangEngine)
    spec = options.sglang
    if spec is None and builds.installed_version(sys.executable, "sglang")[0] is None:
        spec = suite.engine.default_build  # nothing installed here: test the suite's default
    return builds.parse_build_spec(spec, options.patch)


def prepare_engine(suite: Suite, options: Any) -> PreparedEngine:
    """Make (or find) the engine's environment and checkpoints; the heavy part of a run."""
    if isinstance(suite.engine, SGLangEngine):
        assert suite.draft is not None
        python, info = builds.prepare_sglang(_sglang_spec(suite, options))
        return PreparedEngine(info, python,
                              lambda host, port: sglang.launch_command(suite, python, host, port),
                              suite.draft.model, suite.draft.revision)
    from harness.engines.reference.checkpoints import ensure_checkpoints

    python, info = builds.prepare_reference(options.engine_python)
    target, draft = _own_models(suite) or ensure_checkpoints(python, builds.cache_root())
    return PreparedEngine(
        info, python,
        lambda host, port: reference_launch.launch_command(suite, python, host, port,
                                                           target, draft),
        str(draft))


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


def attention_from_server(info: Any) -> list[LayerRow] | None:
    layers = info.get("attention_layers") if isinstance(info, dict) else None
    if not isinstance(layers, list):
        return None
    try:
        return [LayerRow.model_validate(layer) for layer in layers]
    except ValueError:
        return None


def server_mismatches(info: Any, suite: Suite) -> list[str]:
    """Settings the server reports (`/server_info`) that differ from the suite's.

    SGLang's own DFlash tests assert the same fields before measuring.
    """
    if not isinstance(info, dict):
        return ["/server_info did not answer with a JSON object"]
    wanted = {"speculative_algorithm": suite.speculative.algorithm,
              "speculative_num_draft_tokens": suite.speculative.draft_tokens}
    problems = []
    for key, value in wanted.items():
        if value is None or key not in info:
            continue
        reported = info[key]
        if str(reported).upper() != str(value).upper():
            problems.append(f"{key} is {reported!r}, the suite declares {value!r}")
    return problems


def server_env(suite: Suite, fit: Fit) -> dict[str, str]:
    env = dict(suite.engine.env)
    if fit.devices:
        env["CUDA_VISIBLE_DEVICES"] = ",".join(str(d) for d in fit.devices)
    return env


def provenance(loaded: LoadedSuite, engine: PreparedEngine, gpus: Sequence[GPUInfo], fit: Fit,
               data: Any) -> Provenance:
    from harness import provenance as collect

    used = [g for g in gpus if g.index in fit.devices]
    return collect.collect(engine.python, used, server_env(loaded.suite, fit),
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


def _dry_run_command(suite: Suite, options: Any) -> list[str]:
    if isinstance(suite.engine, SGLangEngine):
        build = _sglang_spec(suite, options)
        python = (sys.executable if build.kind == "installed"
                  else str(builds.cache_root() / "envs" / f"sglang-{build.key}" / "bin" / "python"))
        return sglang.launch_command(suite, python, "127.0.0.1", PORT_PLACEHOLDER)
    target, draft = _own_models(suite) or _reference_dirs()
    python = options.engine_python or sys.executable
    return reference_launch.launch_command(suite, python, "127.0.0.1", PORT_PLACEHOLDER,
                                           target, draft)


def describe(loaded: LoadedSuite, options: Any, fit: Fit) -> list[str]:
    """What a run of this suite does, for `--dry-run` and for a skipped run."""
    suite, workload = loaded.suite, loaded.suite.workload
    relation = ">" if suite.floors.strict else ">="
    lines = [
        f"suite      {suite.name} ({loaded.path}, sha256 {loaded.sha256[:12]})",
        f"topology   {fit.reason}",
        f"launch     {shlex.join(_dry_run_command(suite, options))}",
        f"           (port {PORT_PLACEHOLDER} stands for a free port chosen at launch)",
        f"workload   GSM8K run_eval protocol: {workload.shots} shots, questions "
        f"{workload.shots}..{workload.shots + workload.questions - 1} of test.jsonl, "
        f"max_tokens {workload.max_tokens}, temperature {workload.temperature:g}, "
        f"top_p {workload.top_p:g}, concurrency {workload.concurrency}, seed {workload.seed}",
        f"           {workload.warmup_requests} warm-up requests, then /flush_cache, "
        "then POST /generate per question",
        f"floors     accept length {relation} {suite.floors.accept_length:g}"
        + (f", accuracy {relation} {suite.floors.accuracy:g}"
           if suite.floors.accuracy is not None else ""),
    ]
    lines += [f"baseline   {b.label}: {b.accept_length:g} ({b.source})" for b in suite.baselines]
    if suite.draft and suite.draft.expected_layers:
        contract = ", ".join(
            ("causal" if layer.causal else "bidirectional")
            + (f"/w{layer.window}" if layer.window else "")
            for layer in suite.draft.expected_layers)
        lines.append(f"contract   draft layers: {contract}")
    return lines
