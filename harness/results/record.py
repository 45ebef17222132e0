"""The run record: the one contract between running and analysing.

A run folder `results/runs/<suite>/<UTC time>-<id>/` holds `run.json` (a
`RunRecord`), `requests.jsonl` (one `RequestRow` per measured request) and
`server.log`. Baselines are `RunRecord`s with `kind = "baseline"` under
`results/baselines/`. Bump `SCHEMA_VERSION` on any incompatible change and
document it in docs/run-record.md.
"""

from __future__ import annotations

import secrets
from datetime import UTC, datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

SCHEMA_VERSION = 2
SERVER_LOG = "server.log"

VerdictStatus = Literal["pass", "fail", "error", "skipped"]


class _Record(BaseModel):
    # Records written by newer harness versions may carry extra fields: keep them.
    model_config = ConfigDict(extra="allow")


class SuiteInfo(_Record):
    """The suite as this record ran it. For a suite with `[[workloads]]` entries each entry
    is its own record: `name` is the series `<suite>.<entry>`, `entry` the entry's name,
    and `document` the suite with that entry's workload, floors and baselines in place
    of the suite's own (`harness.suite.series.suite_entries`); `sha256` hashes that document."""

    name: str
    path: str | None = None
    sha256: str
    document: dict[str, object]
    entry: str | None = None  # the `[[workloads]]` entry; None: the suite's main workload


class BuildInfo(_Record):
    """The engine build under test."""

    engine: Literal["sglang", "reference", "vllm"]
    spec: str | None = None  # pip requirement, git URL@ref, local path; None = as installed
    version: str | None = None
    git_sha: str | None = None
    patch_sha256: str | None = None
    python: str | None = None  # the engine environment's interpreter
    options: dict[str, object] = Field(default_factory=dict)  # e.g. attention policy, noise
    git_dirty: bool | None = None  # the installed source had uncommitted changes
    source_hash: str | None = None  # "git-tree:<id>" | "sha256:<hex>" of the installed source
    ref: str | None = None  # the ref asked for (branch/tag) before resolving to git_sha
    build_key: str | None = None  # cache entry envs/sglang-<key>
    # "overlay": a local checkout's package served over its release's CPU environment
    # (harness/builds/overlay.py); base: that release's spec and environment key.
    method: str | None = None
    base: dict[str, object] | None = None
    direct_url: dict[str, object] | None = None  # PEP 610 direct_url.json (credentials redacted)
    freeze_sha256: str | None = None  # sha256 of the engine environment's dependency listing
    freeze_path: str | None = None  # that listing, beside the record (engine-freeze.txt)


class GPUInfo(_Record):
    index: int
    name: str
    memory_gib: float
    uuid: str | None = None


class Provenance(_Record):
    harness_version: str
    harness_git_sha: str | None = None
    harness_git_dirty: bool | None = None
    python: str
    platform: str
    hostname: str | None = None
    cpu: str | None = None  # CPU model name
    cpu_isa: list[str] = Field(default_factory=list)  # vector-instruction flags it has
    cpu_count: int | None = None
    torch: str | None = None
    transformers: str | None = None
    cuda: str | None = None
    driver: str | None = None
    gpus: list[GPUInfo] = Field(default_factory=list)
    # Where the engine's models ran, where the harness chooses it (the reference engine:
    # "cuda" for a topology with gpus = 1, else "cpu"); None for engines that pick it
    device: str | None = None
    data_source: str | None = None
    data_sha256: str | None = None
    # sha256 of each checkpoint file the engine served (the reference engine's weights;
    # hub checkpoints are named by id and revision instead)
    weights_sha256: dict[str, str] | None = None
    # Test-only stand-ins on the server's Python path (engine.stand_ins): folder -> sha256
    stand_ins_sha256: dict[str, str] | None = None
    # Test-only patches applied to the engine's installed package (engine.test_patches):
    # file -> sha256 (a run's own --patch is build.patch_sha256)
    test_patches_sha256: dict[str, str] | None = None
    seed: int | None = None
    # A server the run attached to (`--server URL`): what it reported of itself, by route
    # (SGLang's /get_model_info; vLLM's /version, /v1/models); its args are build.options
    server: dict[str, object] | None = None
    argv: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)  # only allow-listed, never secrets


class LaunchInfo(_Record):
    command: list[str]
    host: str
    port: int
    ready_after_s: float | None = None
    # Several processes (nodes of a topology): every one's line by name ("node 1", ...);
    # `command` is node 0's. `launcher`: who started them (None: this host's processes;
    # "slurm job <id>"; "attached": a server someone else runs, started by no one here).
    node_commands: dict[str, list[str]] | None = None
    launcher: str | None = None


class LayerRow(_Record):
    index: int
    layer_type: str | None = None
    window: int | None = None
    causal: bool
    explicit: bool = False


class RuntimeLayerRow(_Record):
    """The attention one draft layer's kernel calls received during a run (not what the
    config or the code says: what the attention kernel was called with), as the CPU
    kernel stand-in recorded it (harness.run.runtime_attention)."""

    index: int
    kernel: str  # "extend" or "decode"
    causal: bool
    window: int | None = None  # tokens a query sees, itself included (as LayerRow.window)


class ClauseRow(_Record):
    """One clause of the draft's contract (harness/suite/draft_contract.py): as the audit
    resolved it for the build measured (`draft_contract`), or as the engine's runtime
    recorded what reached the model (`draft_contract_runtime`)."""

    value: int | str | list[int] | None = None
    source: str | None = None
    note: str | None = None
    error: str | None = None  # the engine's own exception, "Type: message"
    limit: str | None = None  # what the audit could not resolve


class WorkloadInfo(_Record):
    """The workload as it was sent (docs/workloads.md): what identifies its prompts and
    their rendering, beside the suite document that declared it."""

    kind: str
    entry: str | None = None
    protocol: Literal["completion", "chat"] = "completion"
    route: str | None = None  # the engine route every measured request went to
    n_prompts: int | None = None  # questions planned (a question may have several turns)
    categories: list[str] = Field(default_factory=list)  # categories planned, in order
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    sampling_seed: int | None = None  # base of the per-request seeds (temperature > 0)
    stop: list[str] = Field(default_factory=list)
    chat_template_kwargs: dict[str, object] = Field(default_factory=dict)
    system_prompt_sha256: str | None = None
    # The target's chat template as shipped with its tokenizer (chat_template.jinja or
    # tokenizer_config.json `chat_template`): its sha256 and the file it was read from.
    chat_template_sha256: str | None = None
    chat_template_source: str | None = None
    # sha256 over the first turn of every planned request as the harness sends it (the
    # text, or the messages), in order: the same protocol gives the same hash.
    prompts_sha256: str | None = None
    # sha256 over the server's own token ids of those first-turn prompts (chat: the
    # rendered template, `return_prompt_token_ids`), in order; None if not returned.
    rendered_sha256: str | None = None
    data_source: str | None = None
    data_sha256: str | None = None  # canonical rows (same from a file or the hub)
    data_file_sha256: str | None = None  # a local file's bytes


class CategoryResult(_Record):
    """One category's figures, over the requests of that category only."""

    n_prompts: int
    n_requests: int
    accept_length: float | None = None  # under the run's metric
    accept_length_ci: tuple[float, float] | None = None
    accept_length_server_avg: float | None = None
    accept_length_per_request: float | None = None
    accept_length_per_request_mean: float | None = None
    accept_length_spec_accept_length_mean: float | None = None
    completion_tokens: int = 0
    verify_steps: int = 0
    accuracy: float | None = None
    n_correct: int | None = None
    per_position_acceptance: list[float] | None = None
    per_position_ci: list[tuple[float, float]] | None = None


class Spread(_Record):
    """A distribution's statistics over a run's requests (harness.metrics.latency names
    each figure's definition), each with its bootstrap CI over prompts (whole questions
    resampled); seconds unless the name says otherwise."""

    n: int  # values in the distribution (requests, or gaps for ITL)
    mean: float
    p50: float
    p90: float
    p99: float
    mean_ci: tuple[float, float] | None = None
    p50_ci: tuple[float, float] | None = None
    p90_ci: tuple[float, float] | None = None
    p99_ci: tuple[float, float] | None = None


class LatencySummary(_Record):
    """Latency and throughput of a measured phase (harness.metrics.latency): `definitions`
    names what each figure is, as stored."""

    definitions: dict[str, str] = Field(default_factory=dict)
    n_requests: int
    n_timed: int  # requests streamed with at least one output chunk (TTFT, ITL, TPOT)
    ttft_s: Spread | None = None
    tpot_s: Spread | None = None
    itl_s: Spread | None = None
    e2e_s: Spread | None = None
    output_tok_s: float | None = None
    output_tok_s_ci: tuple[float, float] | None = None
    requests_s: float | None = None
    requests_s_ci: tuple[float, float] | None = None
    duration_s: float | None = None
    concurrency: int | None = None
    ci_level: float = 0.95
    notes: list[str] = Field(default_factory=list)  # requests whose timings are missing, why


class QuestionSpeed(_Record):
    """One paired question's sums on both sides of a speedup (harness.metrics.speedup):
    what a later run needs to pair its speedup with this one's by question (the paired
    speedup gate, `[speedup] max_drop`). Times in seconds."""

    question_index: int
    speculative_tpot_sum_s: float  # Σ TPOT over its requests with a TPOT
    speculative_tpot_n: int  # those requests
    speculative_tokens: int  # Σ output tokens
    speculative_e2e_s: float  # Σ end-to-end latency
    target_alone_tpot_sum_s: float
    target_alone_tpot_n: int
    target_alone_tokens: int
    target_alone_e2e_s: float


class Speedup(_Record):
    """Speculation against the target alone (same build, host, prompts and sampling,
    measured back to back), paired by question; `definitions` names each figure
    (harness.metrics.speedup), as stored. A figure is None where it could not be formed
    (`note` says why): never a pass."""

    definitions: dict[str, str] = Field(default_factory=dict)
    n_prompts: int  # questions both runs answered, with a TPOT on both sides
    tpot: float | None = None  # target alone's mean TPOT / speculation's
    tpot_ci: tuple[float, float] | None = None
    throughput: float | None = None  # speculation's output tokens/s / the target alone's
    throughput_ci: tuple[float, float] | None = None
    ci_level: float = 0.95
    target_alone_tpot_s: float | None = None  # mean TPOT over the paired questions
    speculative_tpot_s: float | None = None
    target_alone_output_tok_s: float | None = None  # over the paired questions
    speculative_output_tok_s: float | None = None
    # each side's mean requests in flight (Σ e2e / the measured phase's wall time), the
    # scale `throughput` holds fixed
    speculative_in_flight: float | None = None
    target_alone_in_flight: float | None = None
    # the paired questions' sums, the figures' own inputs (absent in records written
    # before the paired speedup gate: such a run cannot be a speedup reference)
    per_question: list[QuestionSpeed] | None = None
    note: str | None = None  # why a figure is missing


class TargetAloneInfo(_Record):
    """The target served without speculation, measured right after the speculative run on
    the same prompts ([speedup]): its launch, its figures, or why it failed. Its requests
    are `target-alone.jsonl`, its server's log `target-alone.log`. `reused`: another run's
    target alone on exactly these questions (a forced ladder measures it once, after its
    real run: harness.protocols.forced), copied here with its log; `reused_from` names
    that run."""

    status: Literal["measured", "failed", "reused"]
    reason: str | None = None  # what failed
    reused_from: str | None = None  # status "reused": the run_id whose target alone it is
    launch: LaunchInfo | None = None
    n_requests: int = 0
    n_planned: int | None = None
    latency: LatencySummary | None = None


class RankResult(_Record):
    """One data-parallel rank's figures over the requests it served (or one node's: the
    ranks on it pooled), in both definitions. Its counts are part of the run's: summed over
    the ranks they are exactly the run's (harness.metrics.ranks)."""

    rank: int  # the DP rank (in `per_node`: the node)
    node: int | None = None  # the node the rank's scheduler runs on
    ranks: list[int] | None = None  # in `per_node`: the DP ranks on that node
    n_requests: int
    completion_tokens: int
    verify_steps: int
    correct_drafts: int | None = None
    accept_length_server_avg: float
    accept_length_per_request: float
    # /server_info internal_states' avg_spec_accept_length for this rank: the cross-check
    server_reported_accept_length: float | None = None


class Measurement(_Record):
    """A run's figures. `metric` names the definition of `accept_length`, its CI and the
    floors it was judged against (harness.suite.model.METRIC_DEFINITIONS); both definitions'
    exact figures are kept beside it."""

    # v1 records: per_request
    metric: Literal["server_avg", "per_request", "per_request_mean",
                    "spec_accept_length_mean"] = "per_request"
    accept_length: float  # under `metric`
    accept_length_ci: tuple[float, float] | None = None
    ci_level: float = 0.95
    accept_length_server_avg: float | None = None  # (Σcorrect drafts + Σverify) / Σverify
    accept_length_per_request: float | None = None  # Σcompletion tokens / Σverify
    # mean over requests of (correct drafts + k verify) / verify (1 with no draft), its CI
    accept_length_per_request_mean: float | None = None
    accept_length_per_request_mean_ci: tuple[float, float] | None = None
    # mean over requests of completion tokens / verify (SGLang's spec_accept_length), its CI
    accept_length_spec_accept_length_mean: float | None = None
    accept_length_spec_accept_length_mean_ci: tuple[float, float] | None = None
    n_requests: int | None = None  # requests in the figure; None for an external figure
    n_planned: int | None = None  # requests the protocol plans
    partial: bool = False  # the run ended before its plan: never a pass
    completion_tokens: int | None = None
    verify_steps: int | None = None
    correct_drafts: int | None = None
    per_position_acceptance: list[float] | None = None  # P(draft position k accepted)
    # Bootstrap CI over prompts of each position's rate (whole prompts resampled).
    per_position_ci: list[tuple[float, float]] | None = None
    accept_histogram: list[int] | None = None
    n_prompts: int | None = None  # questions in the figure (the unit of sampling)
    categories: dict[str, CategoryResult] | None = None  # per category, when known
    server_reported_accept_length: float | None = None  # /server_info, a cross-check
    server_disagreement: float | None = None  # (reported - server_avg) / server_avg
    # The engine's own per-position counters over the window (vLLM's /metrics), a cross-check
    server_per_position_acceptance: list[float] | None = None
    accuracy: float | None = None
    n_correct: int | None = None
    output_throughput_tok_s: float | None = None
    latency_p50_s: float | None = None
    latency_p90_s: float | None = None
    duration_s: float | None = None
    stopped_early: bool = False  # sequential stopping settled the verdict early
    sequential: dict[str, object] | None = None  # the rule's settings and looks, when used
    # Latency and throughput of the measured phase (streamed requests); it names the
    # definition of each figure (harness.metrics.latency)
    latency: LatencySummary | None = None
    # [speedup]: speculation against the target alone, paired by question
    # (harness.metrics.speedup names each figure's definition)
    speedup: Speedup | None = None
    # A data-parallel topology: every figure per DP rank and per node, beside the pooled
    # ones above (None for one rank); how the server's per-rank states were matched to
    # ranks (`by rank id`, or `by value` where the release names no rank in them)
    per_rank: list[RankResult] | None = None
    per_node: list[RankResult] | None = None
    server_rank_match: str | None = None


class Verdict(_Record):
    status: VerdictStatus
    reasons: list[str] = Field(default_factory=list)


class _Finding(_Record):
    # read once through the door, then only read: a reader cannot change what was recorded
    model_config = ConfigDict(extra="allow", frozen=True)


class PairedAgainst(_Finding):
    """The reference run a paired run was judged against (harness.protocols.pairing)."""

    run_id: str
    path: str | None = None  # its run folder
    spec: str | None = None  # its build spec; None: as installed
    reused: bool  # a stored run reused rather than measured in this job


class PairedGate(_Finding):
    """The suite's `[gate]` as the run applied it (harness.suite.gate.Gate, as recorded)."""

    against: str | None = None
    relative_drop: float | None = None
    absolute_drop: float | None = None
    metric: Literal["server_avg", "per_request", "per_request_mean",
                    "spec_accept_length_mean"] | None = None
    alpha: float | None = None
    beta: float | None = None
    inconclusive: Literal["fail", "pass"] | None = None
    paired_sd: float | None = None
    calibration: str | None = None


class PairedResultInfo(_Finding):
    """The non-inferiority test's finding (harness.metrics.paired_gate.PairedResult), in
    the accept-length definition its `tolerance` names."""

    decision: Literal["not_worse", "worse", "inconclusive"]
    n: int  # paired questions
    a: float  # A's accept length on them
    b: float  # B's
    difference: float  # b - a
    difference_ci: tuple[float, float] | None = None  # two-sided, at `level`
    relative_change: float  # (b - a) / a
    tolerated_drop: float  # in accept-length units at a
    margin: float | None = None  # difference + tolerated_drop
    margin_se: float | None = None
    margin_sd: float | None = None  # per-question sd of the margin (harness power)
    lower: float | None = None  # one-sided bounds of the margin
    upper: float | None = None
    alpha: float | None = None
    level: float  # of difference_ci
    tolerance: str  # the tolerance, described


class PairedSpeedupInfo(_Finding):
    """The paired speedup gate's finding for one figure (`[speedup] max_drop`,
    harness.metrics.speedup.PairedSpeedupResult; its definition in `definition`), or why
    no test could be made (`status` error, `reason`)."""

    figure: Literal["speedup_tpot", "speedup_throughput"]
    status: Literal["pass", "fail", "error"]
    reason: str | None = None  # why no test could be made
    decision: Literal["not_worse", "worse", "inconclusive"] | None = None
    n: int | None = None  # questions both builds paired
    a: float | None = None  # A's speedup on them
    b: float | None = None  # B's
    ratio: float | None = None  # b / a
    ratio_ci: tuple[float, float] | None = None  # two-sided, at `level`
    max_drop: float | None = None  # a share of A's speedup
    alpha: float | None = None
    level: float | None = None
    definition: str | None = None


class PairedFinding(_Finding):
    """`harness run --against`: the paired gate's finding and the run it paired against.
    `floors_status` is the floors' own verdict ("open": a sequential run the gate settled
    before every floor had)."""

    against: PairedAgainst
    gate: PairedGate | None = None
    status: Literal["pass", "fail"]  # the gate's
    floors_status: Literal["pass", "fail", "error", "skipped", "open"]
    result: PairedResultInfo
    # `[speedup] max_drop`: each speedup of B against A's, paired by prompt
    speedup: list[PairedSpeedupInfo] | None = None


class RunRecord(_Record):
    """A run, or a baseline. An external baseline (a figure quoted from elsewhere) has no
    times and no verdict of this harness: `started_at` and `verdict` stay None rather
    than be invented; `source` says where the figure came from."""

    schema_version: int = SCHEMA_VERSION
    kind: Literal["run", "baseline"] = "run"
    run_id: str
    label: str | None = None  # a baseline's label, or a user's tag for the run
    source: str | None = None  # where a baseline's figure came from
    external: bool = False  # a hand-entered figure from elsewhere, not measured here
    started_at: datetime | None
    finished_at: datetime | None = None
    suite: SuiteInfo
    build: BuildInfo
    provenance: Provenance
    launch: LaunchInfo | None = None
    attention: list[LayerRow] | None = None
    # What the draft layers' attention kernel received at run time, where the engine's
    # kernel records it (the CPU stand-in); compared with `attention` (the audit's table)
    attention_runtime: list[RuntimeLayerRow] | None = None
    # The draft's other clauses as the audit resolved them for this build before the
    # launch, and as the engine recorded them at run time (the CPU stand-ins)
    draft_contract: dict[str, ClauseRow] | None = None
    draft_contract_runtime: dict[str, ClauseRow] | None = None
    workload: WorkloadInfo | None = None  # absent in records written before workload kinds
    measurement: Measurement | None = None
    verdict: Verdict | None
    stage: str | None = None  # the stage a run reached: preparation .. recording
    # `harness run --against`: the paired gate's finding and the run it paired against
    # (harness.protocols.pairing)
    paired: PairedFinding | None = None
    # [speedup]: the target alone, measured back to back after this run (harness.run.baseline)
    target_alone: TargetAloneInfo | None = None


class RequestTiming(_Record):
    """When a request's output arrived, on the harness's monotonic clock
    (`time.perf_counter`), in seconds after the request was sent; what each figure made
    of it means is `harness.metrics.latency`'s."""

    streamed: bool
    ttft_s: float | None = None  # the first chunk carrying output
    chunk_s: list[float] = Field(default_factory=list)  # every chunk carrying output
    chunk_tokens: list[int] | None = None  # output tokens each carried, where the stream says
    note: str | None = None  # why a figure is missing (not a stream, no token, the clock)


class RequestRow(_Record):
    """One measured request, as sent and as answered."""

    index: int  # order of submission within the measured phase (turns of a question follow)
    question_index: int  # row of the data (0-based): the unit of sampling
    category: str | None = None  # the category results are broken down by
    subcategory: str | None = None  # e.g. MT-Bench's "writing" under Spec-Bench's mt_bench
    question_id: str | None = None  # the data set's own id
    turn: int = 0  # 0-based turn of a multi-turn question
    prompt_sha256: str | None = None  # sha256 of the server's prompt token ids, if returned
    completion_tokens: int
    verify_steps: int
    correct_drafts: int | None = None  # accepted draft tokens (bonus excluded); None in v1
    dp_rank: int | None = None  # the data-parallel rank that served it (meta_info.dp_rank)
    # Tokens each verify step makes besides its correct drafts: SGLang's
    # num_non_draft_tokens_per_req for the server's algorithm and version (1: the bonus
    # token; UNO from 0.5.20: 2). server_avg's numerator is correct_drafts + this x steps.
    non_draft_tokens_per_step: int = 1
    spec_accept_length: float  # completion_tokens / verify_steps (SGLang's meta_info figure)
    accept_histogram: list[int] | None = None
    prompt_tokens: int | None = None
    latency_s: float
    finish_reason: str | None = None
    predicted: str | None = None
    expected: str | None = None
    correct: bool | None = None
    output: str = ""
    timing: RequestTiming | None = None  # streamed arrival times; None in older records
    # seconds from the start of the measured phase to this request's end (`harness soak`
    # puts each row in the window it finished in); None in older records
    finished_s: float | None = Field(default=None, ge=0.0)


def utc_now() -> datetime:
    return datetime.now(UTC)


def new_run_id() -> str:
    return secrets.token_hex(4)
