"""What a suite measures and how it is judged: `[workload]`, `[[workloads]]`, `[floors]`,
`[[baselines]]` (the rest of the schema is in `harness.suite.model`).

Every workload kind shares the request settings (`_Requests`: protocol, sampling,
concurrency, timeouts); each adds what picks its prompts. The protocol of each kind
(which rows, how a prompt is built, sent and graded) is in its module under
`harness/workloads/` and in docs/workloads.md. A suite's main workload is `[workload]`,
judged by `[floors]`; further entries are `[[workloads]]`, each with a `name`, its own
`[workloads.floors]` and optional `[[workloads.baselines]]` (docs/workloads.md, "Entries").
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, model_validator
from pydantic_core import PydanticCustomError

NAME_PATTERN = r"^[a-z0-9][a-z0-9_\-]*$"
CATEGORY_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$"
WORKLOAD_KINDS = ("gsm8k", "spec_bench", "humaneval", "jsonl")
# Spec-Bench's six tasks (`evaluation/speed.py`): MT-Bench's eight categories form one.
SPEC_BENCH_TASKS = ("mt_bench", "translation", "summarization", "qa", "math_reasoning", "rag")
MT_BENCH_CATEGORIES = ("writing", "roleplay", "reasoning", "math", "coding", "extraction",
                       "stem", "humanities")

TemplateValue = bool | int | float | str


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


IMPOSSIBLE = "impossible"  # the error type of a value no run can meet; ctx names its field


def impossible(field: str, problem: str) -> PydanticCustomError:
    """A validator's refusal of a value no run could meet, naming the field (relative to
    the model that raises it) so the message points at it (`harness.suite.model`)."""
    return PydanticCustomError(IMPOSSIBLE, "{field}: {problem}",
                               {"field": field, "problem": problem})


def exactly_one(first: object, second: object, message: str) -> None:
    """A validator's refusal (`message`) unless exactly one of two alternative settings is
    given."""
    if (first is None) == (second is None):
        raise ValueError(message)


def _above_one(field: str, value: float | None, strict: bool, flag: str) -> None:
    """A share floor of 1.0 judged strictly asks for more than every request: impossible."""
    if strict and value is not None and value >= 1.0:
        raise impossible(field, f"{value:g} with {flag} = true asks for a share above 1, "
                                "which no run has; use >= (strict = false) or a floor below 1")


class Reproduces(_Strict):
    """The named protocol a workload reproduces, and which of its data sets
    (harness/suite/protocols.toml; held to it by `harness.suite.protocol_checks`)."""

    protocol: str = Field(min_length=1)
    dataset: str = Field(min_length=1)


class _Requests(_Strict):
    """How every request of a workload is sent, whatever its kind."""

    # The engine's or paper's test this workload reproduces: every setting the protocol
    # fixes must be the workload's, its floors in the protocol's definition and rule.
    reproduces: Reproduces | None = None

    # "completion": the prompt text as is (SGLang's native /generate); "chat": the turns
    # as messages through the target's chat template (SGLang's /v1/chat/completions).
    protocol: Literal["completion", "chat"] = "completion"
    chat_template_kwargs: dict[str, TemplateValue] = Field(default_factory=dict)
    system_prompt: str | None = Field(default=None, min_length=1)
    max_tokens: int = Field(default=512, ge=1)
    concurrency: int = Field(default=128, ge=1)
    temperature: float = Field(default=0.0, ge=0.0)
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    top_k: int = Field(default=-1, ge=-1)  # -1: no top-k (SGLang's "disabled")
    seed: int = 0  # the server's --random-seed and the CI's bootstrap seed
    # Base of the per-request seeds sent when temperature > 0: request seed =
    # sampling_seed + question index (+ 1,000,000 per later turn). Default: `seed`.
    sampling_seed: int | None = None
    warmup_requests: int = Field(default=2, ge=0)
    request_timeout_s: float = Field(default=600.0, gt=0)
    # A run in which no request finishes for this long is stopped as hung.
    progress_timeout_s: float = Field(default=300.0, gt=0)
    data: str | None = None  # local data file; default: ../shared/data, else `datasets`
    # Under --sequential, requests past the next look are sent only while fewer than this
    # many run (default: concurrency, every slot kept busy). Set it to the batch above which
    # the engine's step time grows with its batch (a GPU's compute-bound verify): past it, a
    # request the rule may cancel slows those the look waits for (docs/statistics.md).
    sequential_in_flight: int | None = Field(default=None, ge=1)

    @model_validator(mode="after")
    def _coherent(self) -> _Requests:
        if self.top_k == 0:
            raise ValueError("top_k is -1 (no top-k) or at least 1; 0 is not a top-k")
        if self.protocol == "completion" and (self.chat_template_kwargs or self.system_prompt):
            raise ValueError("chat_template_kwargs and system_prompt only apply with "
                             "protocol = \"chat\"")
        if self.sequential_in_flight is not None and self.sequential_in_flight > self.concurrency:
            raise ValueError(f"sequential_in_flight ({self.sequential_in_flight}) must be at most "
                             f"concurrency ({self.concurrency})")
        return self

    @property
    def seed_base(self) -> int:
        return self.seed if self.sampling_seed is None else self.sampling_seed


class GSM8KWorkload(_Requests):
    """SGLang's run_eval GSM8K protocol, or vLLM's and the DFlash authors' wordings
    (harness/workloads/gsm8k.py)."""

    kind: Literal["gsm8k"] = "gsm8k"
    questions: int = Field(default=200, ge=1, le=1319)
    shots: int = Field(default=5, ge=0, le=8)
    # "run_eval": "Question: {q}\nAnswer:" after the shots, stopped at "Question" (SGLang's
    # run_eval, vLLM's tests/evals/gsm8k); "boxed": "{q}\nPlease reason step by step, and
    # put your final answer within \\boxed{}.", no shots, no stop strings (vLLM's
    # reference-acceptance test, the DFlash authors' benchmark).
    wording: Literal["run_eval", "boxed"] = "run_eval"
    # Where the shots come from: "test" (SGLang's run_eval: the first lines of test, the
    # questions after them) or "train" (vLLM's gsm8k_eval: the first lines of train, the
    # questions from test line 0).
    shots_from: Literal["test", "train"] = "test"

    @model_validator(mode="after")
    def _wording_and_shots(self) -> GSM8KWorkload:
        if self.wording == "boxed" and self.shots:
            raise ValueError("wording = \"boxed\" asks one question with no shots: set shots = 0")
        start = self.shots if self.shots_from == "test" else 0
        if start + self.questions > 1319:
            raise ValueError(f"GSM8K's test split has 1319 questions; {self.shots} shots from "
                             f"{self.shots_from} and {self.questions} questions need "
                             f"{start + self.questions}")
        return self


class SpecBenchWorkload(_Requests):
    """Spec-Bench's 480 prompts (harness/workloads/spec_bench.py)."""

    kind: Literal["spec_bench"]
    protocol: Literal["completion", "chat"] = "chat"
    max_tokens: int = Field(default=1024, ge=1)  # Spec-Bench's --max-new-tokens
    # Spec-Bench tasks (SPEC_BENCH_TASKS) or MT-Bench categories; empty: all six tasks.
    categories: list[str] = Field(default_factory=list)
    # The first N prompts of each selected category, in file order; None: all of them.
    per_category: int | None = Field(default=None, ge=1)
    # Turns sent per question: MT-Bench questions have two (the second sent with the
    # model's own first answer); 1 sends only first turns.
    turns: int = Field(default=2, ge=1, le=2)
    # GSM8K train worked examples before the first turn: a prefixed context (the grid's
    # prompt-length tiers, harness.suite.grid, harness.workloads.context); 0: none.
    context_shots: int = Field(default=0, ge=0, le=8)

    @model_validator(mode="after")
    def _known_categories(self) -> SpecBenchWorkload:
        known = set(SPEC_BENCH_TASKS) | set(MT_BENCH_CATEGORIES)
        unknown = [c for c in self.categories if c not in known]
        if unknown:
            raise ValueError(f"unknown Spec-Bench categories {unknown}; known: tasks "
                             f"{', '.join(SPEC_BENCH_TASKS)}; MT-Bench categories "
                             f"{', '.join(MT_BENCH_CATEGORIES)}")
        if self.protocol == "completion" and self.turns > 1:
            raise ValueError("a second turn needs the chat template: with protocol = "
                             "\"completion\" set turns = 1")
        return self


class HumanEvalWorkload(_Requests):
    """HumanEval's 164 problems (harness/workloads/humaneval.py)."""

    kind: Literal["humaneval"]
    questions: int = Field(default=164, ge=1, le=164)
    # GSM8K train worked examples before the first turn: a prefixed context (the grid's
    # prompt-length tiers, harness.suite.grid, harness.workloads.context); 0: none.
    context_shots: int = Field(default=0, ge=0, le=8)


class HubSource(_Strict):
    """A Hugging Face data set, loaded with `datasets.load_dataset(id, config, split=...)`."""

    id: str = Field(min_length=1)
    config: str | None = None
    split: str = "test"
    revision: str | None = None


class JsonlWorkload(_Requests):
    """A user's own prompts: a JSON-lines file or a hub data set (harness/workloads/jsonl.py)."""

    kind: Literal["jsonl"]
    hub: HubSource | None = None
    prompt_field: str = Field(default="prompt", min_length=1)  # a string, or a list of turns
    category_field: str | None = Field(default=None, min_length=1)
    id_field: str | None = Field(default=None, min_length=1)
    # Graded with the GSM8K rule (last number in the output equals the answer's last number).
    answer_field: str | None = Field(default=None, min_length=1)
    stop: list[str] = Field(default_factory=list)
    categories: list[str] = Field(default_factory=list)  # empty: every category
    questions: int | None = Field(default=None, ge=1)  # the first N selected rows

    @model_validator(mode="after")
    def _one_source(self) -> JsonlWorkload:
        exactly_one(self.data, self.hub, "a jsonl workload reads exactly one of `data` (a "
                    "JSON-lines file) or `hub` (a Hugging Face data set)")
        return self


def _kind_of(value: object) -> str:
    """The discriminator: `kind`, default "gsm8k" (suites written before the other kinds)."""
    kind = value.get("kind", "gsm8k") if isinstance(value, dict) else getattr(value, "kind", None)
    return kind if isinstance(kind, str) and kind in WORKLOAD_KINDS else "unknown"


# One model per workload kind, chosen by `kind` (unknown kinds name the allowed); spelled
# out (not built by a function) so that a type checker reads `Workload` as the union.
_BY_KIND = Discriminator(_kind_of, custom_error_type="workload_kind",
                         custom_error_message=f"unknown workload kind; allowed: "
                                              f"{', '.join(WORKLOAD_KINDS)}")

Workload = Annotated[
    Annotated[GSM8KWorkload, Tag("gsm8k")]
    | Annotated[SpecBenchWorkload, Tag("spec_bench")]
    | Annotated[HumanEvalWorkload, Tag("humaneval")]
    | Annotated[JsonlWorkload, Tag("jsonl")],
    _BY_KIND,
]


# ------------------------------------------------------------------ floors and baselines

Metric = Literal["server_avg", "per_request", "per_request_mean", "spec_accept_length_mean"]

# What each accept-length definition measures (docs/statistics.md; harness.metrics.measure).
METRIC_DEFINITIONS: dict[str, str] = {
    "server_avg": "tokens made by verify steps per verify step, the prefill token left out: "
                  "(sum correct drafts + sum verify steps) / sum verify steps, SGLang's "
                  "/server_info avg_spec_accept_length computed exactly per request",
    "per_request": "completion tokens per verify step, the prefill token included: "
                   "sum completion_tokens / sum spec_verify_ct, SGLang's per-request "
                   "meta_info.spec_accept_length pooled over the requests that have it "
                   "(a request with 0 verify steps has no spec fields and is left out)",
    "per_request_mean": "the unweighted mean over requests of each request's own accept "
                        "length 1 + accepted / drafts (1 for a request with no draft): "
                        "vLLM's reference-acceptance test (run_acceptance_length_eval, "
                        "tests/v1/e2e/spec_decode/acceptance_rates/utils.py)",
    "spec_accept_length_mean": "the unweighted mean over requests with a verify step of "
                               "each one's completion tokens / verify steps (SGLang's "
                               "per-request meta_info.spec_accept_length): the DFlash "
                               "authors' benchmark against SGLang (dflash/benchmark.py)",
}


class CategoryFloor(_Strict):
    """Floors on one category's requests (the category as the workload names it)."""

    accept_length: float | None = Field(default=None, ge=1.0)
    accuracy: float | None = Field(default=None, ge=0.0, le=1.0)
    # True: this category's figures must exceed its floors (`>`); default `>=`.
    strict: bool = False

    @model_validator(mode="after")
    def _something(self) -> CategoryFloor:
        if self.accept_length is None and self.accuracy is None:
            raise ValueError("a category floor needs accept_length, accuracy or both")
        _above_one("accuracy", self.accuracy, self.strict, "strict")
        return self


class Floors(_Strict):
    accept_length: float = Field(ge=1.0)
    # The definition the floor and the baselines were taken in; the gate judges that one.
    metric: Metric = "server_avg"
    accuracy: float | None = Field(default=None, ge=0.0, le=1.0)
    # Strictness per floor, as the gate each floor was taken from states it: SGLang's
    # Qwen3-8B gate is "accept length > 2.8" but "score >= 0.75", so one flag for every
    # floor would fail exactly 150/200 correct. `strict`: the accept-length floor (`>`);
    # `accuracy_strict`: the accuracy floor; `positions_strict`: the position floors;
    # a category floor carries its own `strict`.
    strict: bool = False
    accuracy_strict: bool = False
    positions_strict: bool = False
    # False-fail / false-pass rates: bounds on the sequential rule's early verdicts and the
    # rates `harness power` sizes margins for (docs/statistics.md). The fixed gate itself is
    # the point estimate against the floor; these never change its verdict.
    alpha: float = Field(default=0.05, gt=0.0, lt=0.5)
    beta: float = Field(default=0.2, gt=0.0, lt=0.5)
    # Per category (key: the category as recorded, e.g. "translation"): its own floors.
    categories: dict[str, CategoryFloor] = Field(default_factory=dict)
    # P(draft position k accepted) >= positions[k - 1], k = 1.. (vLLM's gate has these).
    positions: list[Annotated[float, Field(ge=0.0, le=1.0)]] = Field(default_factory=list)
    # Speedup over the target alone ([speedup], harness.metrics.speedup), judged `>=`: of
    # TPOT (target alone's mean / speculation's) and of output tokens/s (speculation's /
    # the target alone's). A run without [speedup] has neither figure: refused at load.
    speedup_tpot: float | None = Field(default=None, gt=0.0, le=1000.0)
    speedup_throughput: float | None = Field(default=None, gt=0.0, le=1000.0)
    # The published figure or test threshold (harness/suite/references.toml) the
    # accept-length floor is taken from by the reproduced protocol's floor rule.
    reference: str | None = Field(default=None, min_length=1)

    @model_validator(mode="after")
    def _category_names(self) -> Floors:
        bad = [name for name in self.categories if not re.match(CATEGORY_PATTERN, name)]
        if bad:
            raise ValueError(f"category names {bad} must match {CATEGORY_PATTERN}")
        return self

    @model_validator(mode="after")
    def _shares_possible(self) -> Floors:
        _above_one("accuracy", self.accuracy, self.accuracy_strict, "accuracy_strict")
        for position, value in enumerate(self.positions):
            _above_one(f"positions.{position}", value, self.positions_strict,
                       "positions_strict")
        return self


class Baseline(_Strict):
    label: str = Field(min_length=1)
    accept_length: float = Field(ge=1.0)
    accuracy: float | None = Field(default=None, ge=0.0, le=1.0)
    source: str = Field(min_length=1)
    # True: a figure quoted from elsewhere (hand-entered); False: measured by this harness,
    # with its record under results/baselines/.
    external: bool
    metric: Metric | None = None  # default: the floors' metric
    # The references table's entry this figure is (harness/suite/references.toml): its
    # pair, protocol and definition must be the entry's, unless `protocol` names another.
    reference: str | None = Field(default=None, min_length=1)
    # The protocol this figure was measured in when it is not the entry's: the plots and
    # the site draw it apart, labelled with it, and nothing gates on it.
    protocol: str | None = Field(default=None, min_length=1)

    @property
    def gated(self) -> bool:
        """Whether the entry's own protocol measured it: only such a baseline may set a
        level the gate reads (the paired gate's relative tolerance, `power`'s margins)."""
        return self.protocol is None


# ------------------------------------------------------------------ [[workloads]] entries


class _Entry(_Strict):
    """What a `[[workloads]]` entry adds to its kind: a name (its runs are the series
    `<suite>.<name>`), its floors (metric, alpha and beta default to the suite's) and
    its baselines."""

    name: str = Field(pattern=NAME_PATTERN)
    floors: Floors
    baselines: list[Baseline] = Field(default_factory=list)


class GSM8KEntry(_Entry, GSM8KWorkload):
    pass


class SpecBenchEntry(_Entry, SpecBenchWorkload):
    pass


class HumanEvalEntry(_Entry, HumanEvalWorkload):
    pass


class JsonlEntry(_Entry, JsonlWorkload):
    pass


WorkloadEntry = Annotated[
    Annotated[GSM8KEntry, Tag("gsm8k")]
    | Annotated[SpecBenchEntry, Tag("spec_bench")]
    | Annotated[HumanEvalEntry, Tag("humaneval")]
    | Annotated[JsonlEntry, Tag("jsonl")],
    _BY_KIND,
]
ENTRY_KEYS = frozenset({"name", "floors", "baselines"})
INHERITED_FLOOR_KEYS = ("metric", "alpha", "beta")


def known_categories(workload: Workload) -> set[str] | None:
    """The categories a workload's requests can carry; None when only its data can say
    (a jsonl workload with a `category_field`)."""
    if workload.kind == "spec_bench":
        chosen = workload.categories or list(SPEC_BENCH_TASKS)
        tasks = {c for c in chosen if c in SPEC_BENCH_TASKS}
        raw = {c for c in chosen if c in MT_BENCH_CATEGORIES}
        if "mt_bench" in tasks:
            raw |= set(MT_BENCH_CATEGORIES)
        return tasks | raw | ({"mt_bench"} if raw else set())
    if workload.kind == "jsonl" and workload.category_field is not None:
        return None
    return {workload.kind}
