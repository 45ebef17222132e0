"""The `--dry-run` text (also a skipped run's plan): what a run of a suite would do, with
the launch as a shell line that runs when pasted (the server's environment included,
secrets redacted), the data each workload entry would read, floors and baselines."""

from __future__ import annotations

import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from harness import builds
from harness.builds.sglang_cpu import CPU_ENGINE_ENV, host_device
from harness.engines.interface import Placement
from harness.engines.registry import adapter_for
from harness.errors import BadInput
from harness.metrics.floor_checks import FloorCheck, floor_checks
from harness.results.baselines import shown_label
from harness.run.plan import (
    ChosenBuild,
    models,
    reference_dirs,
    served_dirs,
    server_env,
    test_patch_files,
    vllm_tiny_models,
)
from harness.run.preflight import Fit
from harness.run.recorded import redact_command
from harness.run.schedulers import kubernetes, slurm
from harness.run.schedulers.deployment import placements
from harness.secrets import redact_env, redact_text
from harness.suite.checkpoints import Models, model_source
from harness.suite.draft_contract import show_value
from harness.suite.model import (
    METRIC_DEFINITIONS,
    Baseline,
    Entry,
    LoadedSuite,
    Suite,
    VLLMEngine,
    suite_entries,
)
from harness.suite.release_patches import shown
from harness.suite.serving import DRAFTLESS, EnvModel, ModelRef, ReferenceEngine, SGLangEngine
from harness.workloads import describe as describe_workload
from harness.workloads import prepare
from reference_engine.checkpoints import uniform_draft

if TYPE_CHECKING:
    from harness.run.outcome import RunOptions

PORT_PLACEHOLDER = 30000


def _dry_run_command(suite: Suite, options: RunOptions, chosen: ChosenBuild,
                     placement: Placement | None = None) -> list[str]:
    adapter = adapter_for(suite.engine.kind)
    if isinstance(suite.engine, VLLMEngine):
        python = builds.planned_vllm_python(chosen.spec)
        try:
            chosen_models = models(suite, options) or vllm_tiny_models(suite.engine)
        except BadInput:
            chosen_models = Models(_placeholder(suite.target), _placeholder(suite.draft))
        return adapter.launch_command(suite, python, "127.0.0.1", _port(placement),
                                      chosen_models, None, placement)
    if isinstance(suite.engine, SGLangEngine):
        python = options.engine_python or builds.planned_python(chosen.spec)
        try:
            sglang_models = models(suite, options)
        except BadInput:  # a model from an unset variable: show where it would come from
            draft = None if suite.speculative.algorithm in DRAFTLESS else suite.draft
            sglang_models = Models(_placeholder(suite.target),
                                   _placeholder(draft) if draft else None,
                                   suite.target.revision if suite.target else None,
                                   suite.draft.revision if suite.draft else None)
        return adapter.launch_command(suite, python, "127.0.0.1", _port(placement),
                                      sglang_models, None, placement)
    reference_models = models(suite, options)
    dirs = served_dirs(reference_models) if reference_models else reference_dirs()
    if not reference_models and isinstance(suite.engine, ReferenceEngine) and \
            suite.engine.tiny_draft != "shipped":
        dirs = uniform_draft(suite.engine.tiny_draft)
    python = options.engine_python or sys.executable
    return adapter.launch_command(suite, python, "127.0.0.1", PORT_PLACEHOLDER, None, dirs,
                                  placement)


def scheduler_plan(suite: Suite, options: RunOptions, chosen: ChosenBuild, fit: Fit | None
                   ) -> list[str]:
    """What a scheduler would be given: Slurm's batch script and its sbatch line, or a
    Kubernetes LeaderWorkerSet manifest (secrets redacted as everywhere)."""
    env = _dry_run_env(suite, options, chosen, fit)

    class Planned:  # what the schedulers ask of an engine: its line per placement
        spec_text = chosen.spec.text
        python = options.engine_python or (builds.planned_vllm_python(chosen.spec)
                                           if isinstance(suite.engine, VLLMEngine)
                                           else builds.planned_python(chosen.spec))

        @staticmethod
        def command(host: str, port: int, placement: Placement | None = None) -> list[str]:
            line = _dry_run_command(suite, options, chosen, placement)
            value = {"--host": host, "--port": str(port)}
            return redact_command([value.get(previous, word) for previous, word in
                                   zip(["", *line[:-1]], line, strict=True)], suite)

    if options.launcher == "kubernetes":
        manifest = kubernetes.manifest(Planned, suite, env)
        return ["launch     kubernetes: this LeaderWorkerSet, for `kubectl apply -f -`; then "
                "`harness run SUITE --server http://<its service>:<port>`", manifest]
    job_options = options.launcher_options or slurm.SlurmOptions()
    run_dir = Path(options.results_dir).resolve() / "runs" / suite.name / "<run folder>"
    job = slurm.prepare(Planned, suite, env, run_dir, job_options, ())
    return [f"launch     slurm: `sbatch --parsable {run_dir / slurm.SCRIPT_FILE}` with this "
            "script (secret values travel in the job's environment, never in it):",
            job.script]


def _port(placement: Placement | None) -> int:
    """The placeholder HTTP port of a process: a split's decode side gets its own."""
    return PORT_PLACEHOLDER + (10 if placement is not None and placement.side == "decode"
                               else 0)


def topology_lines(suite: Suite, options: RunOptions, chosen: ChosenBuild, fit: Fit | None
                   ) -> list[str]:
    """Every process of a multi-process topology as its own pasteable line: node 0's
    rendezvous and a split's bootstrap port stand as placeholders like the port."""
    named = placements(suite.topology, f"127.0.0.1:{PORT_PLACEHOLDER + 1}",
                       PORT_PLACEHOLDER + 2)
    lines = [f"topology   {suite.topology.parallel_text()}: {len(named)} processes"]
    for name, placement in named:
        lines.append(f"launch     {name}: {dry_run_line(suite, options, chosen, fit, placement)}")
    return lines


def dry_run_line(suite: Suite, options: RunOptions, chosen: ChosenBuild, fit: Fit | None,
                 placement: Placement | None = None) -> str:
    """The launch as a shell line that runs when pasted: `env` with the server's whole
    environment (the stand-ins on PYTHONPATH, SGLang's CPU engine switch, the suite's
    engine.env), then the command; secrets redacted as everywhere."""
    command = redact_command(_dry_run_command(suite, options, chosen, placement), suite)
    env = _dry_run_env(suite, options, chosen, fit)
    if not env:
        return shlex.join(command)
    shown = redact_env(env)
    return shlex.join(["env", *(f"{name}={value}" for name, value in shown.items()),
                       *command])


def target_alone_line(suite: Suite, options: RunOptions, chosen: ChosenBuild) -> str:
    """The target alone's launch line ([speedup], harness.run.baseline): the engine's
    line less its speculative flags, in the same environment as the line above."""
    line = _dry_run_command(suite, options, chosen, None)
    return shlex.join(redact_command(adapter_for(suite.engine.kind).target_alone_command(line),
                                     suite))


def _dry_run_env(suite: Suite, options: RunOptions, chosen: ChosenBuild,
                 fit: Fit | None) -> dict[str, str]:
    """The server's environment as a run would set it: read from the build's environment
    when it exists (its build note), else what the build will record (the CPU recipe's
    engine switch for a release built on a host without a GPU)."""
    facts, build_env = None, None
    if isinstance(suite.engine, SGLangEngine):
        python = options.engine_python or builds.planned_python(chosen.spec)
        if Path(python).is_file():
            facts = builds.probe_environment(python)
        elif chosen.spec.kind == "pip":
            build_env = dict(CPU_ENGINE_ENV) if host_device() == "cpu" else None
    return server_env(suite, fit, facts, build_env)


def _placeholder(ref: ModelRef | None) -> str:
    model = ref.model if ref is not None else None
    return f"${model.env}" if isinstance(model, EnvModel) else str(model)


def describe(loaded: LoadedSuite, options: RunOptions, fit: Fit, chosen: ChosenBuild,
             entries: Sequence[Entry] | None = None) -> list[str]:
    """What a run of this suite does, for `--dry-run` and for a skipped run. A dry run
    also loads each workload's data (exit 2 when it cannot), so the plan shows the data
    hash the run will record; a skipped run does not."""
    suite = loaded.suite
    launch = ([f"launch     {dry_run_line(suite, options, chosen, fit)}"]
              if suite.topology.tensor_parallel_only
              else topology_lines(suite, options, chosen, fit))
    if suite.speedup is not None and suite.topology.tensor_parallel_only:
        launch.append(f"then       the target alone ([speedup]): "
                      f"{target_alone_line(suite, options, chosen)}")
    if getattr(options, "launcher", None) is not None:
        launch = scheduler_plan(suite, options, chosen, fit)
    if options.server:
        launch = [f"attach     {redact_text(options.server)}: nothing launched or stopped; the "
                  "server must report the suite's model, algorithm, draft, draft tokens and "
                  "topology", "           (were it launched here:)", *launch]
    lines = [
        f"suite      {suite.name} ({loaded.path}, sha256 {loaded.sha256[:12]})",
        f"topology   {fit.reason}",
        f"build      {redact_text(chosen.spec.text or 'as installed')}",
        *launch,
        *([] if getattr(options, "launcher", None) else [
            f"           (port {PORT_PLACEHOLDER} stands for a free port chosen at launch"
        + (f", {PORT_PLACEHOLDER + 1} for node 0's rendezvous" if suite.topology.nnodes > 1
           else "")
        + (f", {PORT_PLACEHOLDER + 2} for the prefill side's bootstrap and "
           f"{PORT_PLACEHOLDER + 10} for the decode side"
           if suite.topology.disaggregation else "")
        + "; the line runs as printed, in a shell)"]),
    ]
    release = chosen.spec.release
    if release is not None:  # a run of it would stop here: so does its plan
        test_patch_files(suite, release)
    patches = ([f"--patch {chosen.spec.patch}"] if chosen.spec.patch is not None else []) + [
        f"test patch {f}" for f in shown(getattr(suite.engine, "test_patches", []), release)]
    if patches:  # applied in this order to a copy of the installed package
        lines.insert(3, f"patches    {'; then '.join(patches)}")
    if suite.engine.kind in ("sglang", "vllm"):
        draftless = suite.speculative.algorithm in DRAFTLESS
        lines += [f"target     {model_source(suite.target)}",
                  "draft      " + (f"none ({suite.speculative.algorithm} drafts without a "
                                   "model)" if draftless else model_source(suite.draft))]
    entries = entries if entries is not None else suite_entries(loaded)
    for entry in entries:
        if len(entries) > 1 or entry.name is not None:
            lines.append(f"entry      {entry.series} (its own record and floors)")
        lines += _describe_entry(entry.loaded, load_data=bool(options.dry_run))
    if suite.draft and suite.draft.expected_layers:
        contract = ", ".join(
            ("causal" if layer.causal else "bidirectional")
            + (f"/w{layer.window}" if layer.window else "")
            for layer in suite.draft.expected_layers)
        lines.append(f"contract   draft layers: {contract}")
    expected = suite.draft.expected_contract if suite.draft else None
    if expected is not None:
        clauses = expected if isinstance(expected, str) else ", ".join(
            f"{name} {show_value(tuple(v) if isinstance(v, list) else v)}"
            for name, v in expected.items())
        lines.append(f"contract   clauses: {clauses} (checked before the launch and at run "
                     "time)")
    return lines


def _describe_entry(loaded: LoadedSuite, load_data: bool) -> list[str]:
    suite, workload = loaded.suite, loaded.suite.workload
    floors = suite.floors
    adapter = adapter_for(suite.engine.kind)
    chat = workload.protocol == "chat"
    route = adapter.chat_path if chat else adapter.generate_path
    options = ", ".join(f"{k}={v}" for k, v in workload.chat_template_kwargs.items())
    how = ("completion (the text as is)" if not chat
           else f"chat template ({options})" if options else "chat template")
    sampling = (f"max_tokens {workload.max_tokens}, temperature {workload.temperature:g}, "
                f"top_p {workload.top_p:g}"
                + (f", top_k {workload.top_k}" if workload.top_k != -1 else "")
                + (f", per-request seeds from {workload.seed_base}"
                   if workload.temperature > 0 else ""))
    lines = [
        f"workload   {describe_workload(workload)}",
        f"           {how}; {sampling}, concurrency {workload.concurrency}"
        + (f" (with --sequential, {workload.sequential_in_flight} past the next look)"
           if workload.sequential_in_flight else "")
        + f", seed {workload.seed}",
        f"           {workload.warmup_requests} warm-up requests, then /flush_cache, "
        f"then POST {route} per request",
    ]
    if load_data:
        plan = prepare(workload)
        requests = sum(len(p.turns) for p in plan.prompts)
        lines.append(f"data       {plan.source} (rows sha256 {plan.sha256}); "
                     f"{len(plan.prompts)} prompts, {requests} requests")
    lines += [f"metric     {floors.metric}: {METRIC_DEFINITIONS[floors.metric]}",
              *floor_lines(floor_checks(floors))]
    lines += [baseline_line(b, floors.metric) for b in suite.baselines]
    return lines


def floor_lines(checks: list[FloorCheck]) -> list[str]:
    """The floors in the plan: the run's own on one line, then one per category, then the
    draft positions, each with its strictness (as the judge compares)."""
    def part(check: FloorCheck, what: str) -> str:
        return f"{what} {check.relation} {check.floor:g}"

    overall = ", ".join(part(c, f"accept length ({c.definition})" if c.kind == "accept_length"
                                else "accuracy") for c in checks if c.overall)
    categories: dict[str, list[str]] = {}
    for check in checks:
        if check.category is not None:
            what = "accuracy" if check.kind == "category_accuracy" else "accept length"
            categories.setdefault(check.category, []).append(part(check, what))
    positions = [part(c, f"k={c.position}") for c in checks if c.kind == "position"]
    return [f"floors     {overall}",
            *[f"           category {name}: {', '.join(parts)}"
              for name, parts in categories.items()],
            *([f"           P(position k accepted): {', '.join(positions)}"] if positions
              else [])]



def baseline_line(baseline: Baseline, metric: str) -> str:
    """A baseline in the plan: its figure, definition, where it was measured, its source;
    "measured here" said once when the source already says it."""
    where = "external" if baseline.external else "measured here"
    source = redact_text(baseline.source)
    said = source.lower().startswith(where)
    return (f"baseline   {shown_label(baseline.label, baseline.protocol)}: "
            f"{baseline.accept_length:g} "
            f"({baseline.metric or metric}{'' if said else ', ' + where}) {source}")
