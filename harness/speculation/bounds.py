"""The most a suite's figures can be, from its `[speculative]` settings: a floor or a
baseline that no build could reach is refused when the suite loads (`harness.suite.schema`).

A verify step makes its correct drafts and k tokens of its own (SGLang's
`num_non_draft_tokens_per_req`: 1, the bonus token; 2 for UNO), and SGLang counts every
step whole (`batch_result_processor`: a request's `accept_lens` per step is its correct
drafts + k). The correct drafts are at most what one step can accept, read from SGLang
0.5.23's workers; so a step makes at most T tokens:

- DFLASH: T = B, the block size (num_draft_tokens): the block is the verified token and
  B - 1 drafts (`dflash_worker_v2._commit_accept`: commit length = correct drafts + 1).
- EAGLE, EAGLE3, NEXTN, STANDALONE: T = min(num_steps + 1, num_draft_tokens): the
  accepted drafts are one path of the draft tree, at most num_steps below its root
  (`eagle_info.max_tree_depth` = steps + 1) and among its num_draft_tokens nodes, the
  root included.
- NGRAM: T = num_draft_tokens: its tree has no depth cap, one match may chain every node,
  the root included (`ngram_info.max_tree_depth`).
- UNO: T = F + 1, F = num_draft_tokens (linear) or num_steps + 1 (eagle_topk > 1): F
  candidates, the root included, accept at most F - 1 drafts, and k = 2
  (`uno_worker_v2._accept_and_pack`).

vLLM counts as SGLang does (`harness.engines.vllm.launch.num_speculative_tokens` proposes
num_draft_tokens - 1 tokens), except that an EAGLE-style suite giving `num_steps` proposes
num_steps tokens whatever num_draft_tokens says: T = num_steps + 1 there. A count the suite
leaves unset (SGLang takes it from the draft's config or picks one) is taken at its largest,
`MAX_DRAFT_TOKENS`, the schema's bound.

Per definition of accept length (`harness.suite.entries.METRIC_DEFINITIONS`):
- `server_avg`, tokens made by verify steps per verify step: at most T;
- `per_request`, completion tokens per verify step, the prefill token included: at most
  T + 1. Each request it counts has at least one verify step, so the prefill tokens add at
  most 1 per step (all of it when every request ends after one full step).
Draft position p (the p-th draft of a step, `floors.positions[p - 1]`) exists for
p <= T - k. The suite validator (`harness.suite.schema`) refuses a floor or baseline above
these; the results door (`harness.results.checks.step_of`) refuses a stored figure or
request row above them, from the settings its record's suite document names: what a suite
may ask for, a record may hold.
"""

from __future__ import annotations

from dataclasses import dataclass

MAX_DRAFT_TOKENS = 64  # `Speculative.num_draft_tokens` / `block_size` at most
ALGORITHMS = ("DFLASH", "EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM", "UNO")
DEFAULT_ALGORITHM = "DFLASH"  # a suite that names none (`Speculative.algorithm`)
EAGLE_STYLE = frozenset({"EAGLE", "EAGLE3", "NEXTN", "STANDALONE"})
# Tokens a verify step makes besides its correct drafts (SGLang's
# num_non_draft_tokens_per_req; per release in harness.engines.sglang.api, where UNO,
# added in 0.5.20, has had 2 since): 1 unless named here.
NON_DRAFT_TOKENS = {"UNO": 2}


@dataclass(frozen=True)
class StepBound:
    """The most one verify step can make, and why (for messages)."""

    tokens: int  # T
    non_draft: int  # k
    reason: str  # "a DFLASH verify step of block size 8 makes at most 8 tokens"

    @property
    def drafts(self) -> int:
        """Draft positions a step can accept."""
        return self.tokens - self.non_draft

    def accept_length(self, metric: str) -> int:
        """The largest accept length in `metric`'s definition."""
        return self.tokens + (1 if metric == "per_request" else 0)

    def accept_reason(self, metric: str) -> str:
        if metric == "per_request":
            return (f"{self.reason}, and per_request adds each request's prefill token (at "
                    f"most 1 per step): at most {self.accept_length(metric)}")
        # server_avg pools steps of at most T; per_request_mean averages requests' own
        return f"{self.reason}: {metric} is at most {self.accept_length(metric)}"


def step_bound(algorithm: str, num_draft_tokens: int | None, num_steps: int | None,
               eagle_topk: int | None, engine: str = "sglang") -> StepBound:
    """T and k for the suite's settings (module docstring); an unset count at its largest."""
    non_draft = NON_DRAFT_TOKENS.get(algorithm, 1)
    drafts = num_draft_tokens if num_draft_tokens is not None else MAX_DRAFT_TOKENS
    unset = "" if num_draft_tokens is not None else " (num_draft_tokens unset: the most " \
        "the schema allows)"
    if algorithm == "DFLASH":
        return StepBound(drafts, non_draft, f"a DFLASH verify step of block size {drafts} "
                                            f"makes at most {drafts} tokens{unset}")
    if algorithm in EAGLE_STYLE:
        if num_steps is not None and (engine == "vllm" or num_draft_tokens is None):
            tokens, why = num_steps + 1, f"{num_steps} draft steps"
        elif num_steps is not None:
            tokens = min(num_steps + 1, drafts)
            why = f"{num_steps} draft steps and {drafts} draft tokens"
        else:
            tokens, why = drafts, f"{drafts} draft tokens{unset}"
        return StepBound(tokens, non_draft, f"an {algorithm} verify step of {why} makes at "
                                            f"most {tokens} tokens")
    if algorithm == "UNO":
        tree = eagle_topk is not None and eagle_topk > 1
        width = (num_steps + 1 if num_steps is not None else MAX_DRAFT_TOKENS) if tree \
            else drafts
        tokens = width + non_draft - 1
        return StepBound(tokens, non_draft, f"a UNO verify step of width {width} makes at "
                                            f"most {tokens} tokens")
    return StepBound(drafts, non_draft, f"an {algorithm} verify step of {drafts} draft "
                                        f"tokens makes at most {drafts} tokens{unset}")


def loosest_bound(num_draft_tokens: int | None, num_steps: int | None,
                  eagle_topk: int | None, engine: str = "sglang") -> StepBound:
    """The most a step can make, and the most drafts it can accept, under any algorithm
    with these counts: for settings that name no algorithm a suite may have."""
    bounds = [step_bound(name, num_draft_tokens, num_steps, eagle_topk, engine)
              for name in ALGORITHMS]
    tokens = max(bound.tokens for bound in bounds)
    drafts = max(bound.drafts for bound in bounds)
    return StepBound(tokens, tokens - drafts, f"a verify step of any algorithm (these "
                                              f"settings name none) makes at most {tokens} "
                                              "tokens")
