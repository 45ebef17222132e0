"""SGLang's HTTP API as the harness uses it: routes, request bodies, response figures.

Facts read in SGLang 0.5.23's source (and 0.5.17's where they differ):
- readiness: `GET /health_generate` answers 200 once a generation works
  (`entrypoints/http_server.py`);
- requests: native `POST /generate` returns `meta_info` with the speculative figures;
  `/v1/completions` carries none (`entrypoints/openai/protocol.py`, `CompletionRequest`);
  `POST /v1/chat/completions` renders the target's chat template (with the request's
  `chat_template_kwargs`) and, with `"return_meta_info": true` (non-streaming),
  returns each choice's `meta_info` exactly as /generate does (`serving_chat.py`,
  `_build_chat_response`: `choice_meta_info = ret_item["meta_info"]`), and with
  `"return_prompt_token_ids": true` the rendered prompt's token ids
  (`choices[i].prompt_token_ids`); both fields exist in 0.5.17 too. Unset sampling
  fields of a chat request take the model's `generation_config.json` values (server
  arg `--sampling-defaults`, default "model": `ModelConfig.get_default_sampling_params`),
  so the harness always sends temperature, top_p, top_k, min_p and repetition_penalty;
- `POST /flush_cache` resets the server's counters, and answers 400 while requests run;
  with several DP ranks it answers for the first rank alone, so a busy rank can keep its
  counters behind a 200 (`ranks_kept_after_flush`);
- `GET /server_info` (`/get_server_info` before it) merges the resolved server args
  (`utils/common.py`, `build_server_info`) with `internal_states`, one dict per DP rank,
  whose `avg_spec_accept_length` is `spec_num_accept_tokens / spec_num_forward_ct`
  (`managers/scheduler_components/metrics_reporter.py`);
- per request, `managers/tokenizer_manager.py` `_calculate_spec_decoding_metrics` sets
  `spec_verify_ct`, `spec_num_correct_drafts`, `spec_accept_length` (= completion_tokens /
  spec_verify_ct) and `spec_correct_drafts_histogram`, only when the request had a verify
  step. 0.5.17 also sends the aliases `spec_accepted_drafts` / `spec_proposed_drafts` /
  `spec_accept_histogram`; releases before it sent `spec_accept_token_num`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from harness.engines.interface import ParsedResponse, only_choice, prompt_ids_sha256
from harness.engines.settings import mismatches
from harness.errors import MissingMetric

READY_PATHS: tuple[str, ...] = ("/health_generate",)
# What a server says of itself, read when the harness attaches to one it did not start
# (`harness run --server URL`): the resolved server args and per-rank states, and the
# model it serves (`entrypoints/http_server.py`: /server_info, /get_model_info).
IDENTITY_PATHS: tuple[str, ...] = ("/server_info", "/get_model_info")
LIVENESS_PATH = "/health"
GENERATE_PATH = "/generate"
CHAT_PATH = "/v1/chat/completions"
FLUSH_PATH = "/flush_cache"
SERVER_INFO_PATHS = ("/server_info", "/get_server_info")

# Field names across SGLang versions, newest first; parsing takes the first present.
COMPLETION_TOKEN_KEYS = ("completion_tokens", "output_tokens", "num_output_tokens")
VERIFY_STEP_KEYS = ("spec_verify_ct", "spec_verify_count", "verify_ct", "spec_num_verify")
CORRECT_DRAFT_KEYS = ("spec_num_correct_drafts", "spec_accepted_drafts", "spec_accept_token_num")
HISTOGRAM_KEYS = (
    "spec_correct_drafts_histogram",
    "spec_accept_histogram",
    "spec_accept_length_histogram",
)
ACCEPT_LENGTH_KEYS = ("spec_accept_length", "accept_length")
SERVER_ACCEPT_KEYS = ("avg_spec_accept_length", "spec_accept_length", "accept_length")


def _first(meta: Mapping[str, Any], keys: Sequence[str]) -> Any:
    for key in keys:
        if key in meta and meta[key] is not None:
            return meta[key]
    return None


def _as_count(value: Any, field: str, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise MissingMetric(f"{where}: meta_info.{field} is not a count: {value!r}")
    if isinstance(value, float) and not value.is_integer():
        raise MissingMetric(f"{where}: meta_info.{field} is not a whole number: {value!r}")
    return int(value)


def _finish_reason(meta: Mapping[str, Any]) -> str | None:
    reason = meta.get("finish_reason")
    if isinstance(reason, Mapping):
        return str(reason.get("type")) if reason.get("type") is not None else None
    return None if reason is None else str(reason)


def generate_body(text: str, params: Mapping[str, Any], rid: str) -> dict[str, Any]:
    """A native `/generate` request (one prompt, SGLang sampling params)."""
    return {"text": text, "sampling_params": dict(params), "rid": rid}


def chat_body(messages: Sequence[Mapping[str, str]], params: Mapping[str, Any], rid: str,
              template_kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """A `/v1/chat/completions` request with the same sampling as `generate_body`.

    `params` are SGLang sampling params (max_new_tokens, temperature, top_p, top_k, stop,
    sampling_seed); unset ones are sent at the /generate defaults so that the model's
    generation_config (`--sampling-defaults model`) never changes what the suite declares.
    """
    body: dict[str, Any] = {
        "messages": [dict(message) for message in messages],
        "max_completion_tokens": params["max_new_tokens"],
        "temperature": params.get("temperature", 1.0),
        "top_p": params.get("top_p", 1.0),
        "top_k": params.get("top_k", -1),
        "min_p": 0.0,
        "repetition_penalty": 1.0,
        "stream": False,
        "return_meta_info": True,
        "return_prompt_token_ids": True,
        "rid": rid,
    }
    if params.get("stop"):
        body["stop"] = list(params["stop"])
    if params.get("sampling_seed") is not None:
        body["seed"] = params["sampling_seed"]
    if template_kwargs:
        body["chat_template_kwargs"] = dict(template_kwargs)
    return body


def chat_template_flag(extra_args: Sequence[str]) -> str | None:
    """The `--chat-template` a launch line passes (a file or a built-in template name,
    `arg_groups/fields/serving.py`), which replaces the tokenizer's own."""
    for i, arg in enumerate(extra_args):
        if arg == "--chat-template" and i + 1 < len(extra_args):
            return extra_args[i + 1]
        if arg.startswith("--chat-template="):
            return arg.split("=", 1)[1]
    return None


def parse_chat(payload: Any, where: str = CHAT_PATH, speculative: bool = True
               ) -> ParsedResponse:
    """Read one `/v1/chat/completions` response (one choice, `return_meta_info`): the
    answer is `message.content`, the figures its `meta_info` as for /generate."""
    choice = only_choice(payload, where)
    meta = choice.get("meta_info", payload.get("meta_info"))
    if not isinstance(meta, Mapping):
        raise MissingMetric(f"{where}: the choice has no meta_info (the server ignored "
                            "\"return_meta_info\": true; SGLang 0.5.17 and later send it)")
    message = choice.get("message")
    content = message.get("content") if isinstance(message, Mapping) else None
    parsed = parse_generate({"text": content or "", "meta_info": meta}, where, speculative)
    if meta.get("finish_reason") is None and choice.get("finish_reason") is not None:
        parsed = replace(parsed, finish_reason=str(choice["finish_reason"]))
    return replace(parsed, prompt_sha256=prompt_ids_sha256(choice.get("prompt_token_ids")))


def parse_generate(payload: Any, where: str = "/generate", speculative: bool = True
                   ) -> ParsedResponse:
    """Read one native `/generate` response; raise `MissingMetric` if a figure is absent.
    `speculative` False: a server running the target alone ([speedup]), whose answers
    carry no spec counts: the tokens alone, 0 verify steps."""
    if isinstance(payload, list) and len(payload) == 1:
        payload = payload[0]  # a batch of one comes back as a one-element list
    if not isinstance(payload, Mapping):
        raise MissingMetric(f"{where}: expected a JSON object, got {type(payload).__name__}")
    meta = payload.get("meta_info")
    if not isinstance(meta, Mapping):
        raise MissingMetric(f"{where}: response has no meta_info (is this the native /generate?)")
    tokens = _first(meta, COMPLETION_TOKEN_KEYS)
    if tokens is None:
        raise MissingMetric(f"{where}: meta_info has no completion token count "
                            f"(looked for {', '.join(COMPLETION_TOKEN_KEYS)})")
    if not speculative:
        prompt = meta.get("prompt_tokens")
        return ParsedResponse(
            text=str(payload.get("text") or ""),
            completion_tokens=_as_count(tokens, "completion_tokens", where), verify_steps=0,
            correct_drafts=None, histogram=None,
            prompt_tokens=int(prompt) if isinstance(prompt, int) else None,
            finish_reason=_finish_reason(meta), dp_rank=_rank(meta.get("dp_rank")))
    steps = _first(meta, VERIFY_STEP_KEYS)
    if steps is None and isinstance(tokens, int) and tokens <= 1:
        # SGLang omits every spec key when a request ended before any verify step
        # (its one token came from prefill): a valid row with 0 steps.
        steps = 0
    if steps is None:
        if _first(meta, ACCEPT_LENGTH_KEYS) is None:
            raise MissingMetric(
                f"{where}: meta_info has no verify count (looked for "
                f"{', '.join(VERIFY_STEP_KEYS)}); is speculative decoding enabled?"
            )
        raise MissingMetric(
            f"{where}: meta_info has spec_accept_length but no verify count; "
            "an exact figure needs the count"
        )
    completion = _as_count(tokens, "completion_tokens", where)
    verify = _as_count(steps, "spec_verify_ct", where)
    if completion > 1 and verify == 0:
        raise MissingMetric(f"{where}: {completion} tokens but 0 verify steps: speculative "
                            "decoding did not run for this request")
    correct = _first(meta, CORRECT_DRAFT_KEYS)
    correct_drafts = _as_count(correct, "spec_num_correct_drafts", where) if correct is not None \
        else (0 if verify == 0 else None)
    histogram = _first(meta, HISTOGRAM_KEYS)
    if histogram is not None and not (
        isinstance(histogram, list) and all(isinstance(v, int) for v in histogram)
    ):
        histogram = None  # malformed histograms are dropped: they only feed a plot
    prompt = meta.get("prompt_tokens")
    return ParsedResponse(
        text=str(payload.get("text") or ""),
        completion_tokens=completion,
        verify_steps=verify,
        correct_drafts=correct_drafts,
        histogram=histogram,
        prompt_tokens=int(prompt) if isinstance(prompt, int) else None,
        finish_reason=_finish_reason(meta),
        dp_rank=_rank(meta.get("dp_rank")),
    )


def _rank(value: Any) -> int | None:
    """`meta_info.dp_rank`: the DP rank whose scheduler answered (`tokenizer_manager.py`,
    from the scheduler's `BatchTokenIDOutput.dp_ranks`); None when absent or not a rank."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


# Keys a rank's state may name its rank by (none in 0.5.23, whose states come in the order
# the ranks answered, `managers/communicator.py` FanOutCommunicator; newer releases add
# `spec_counter_dp_rank`).
STATE_RANK_KEYS = ("spec_counter_dp_rank", "dp_rank", "attn_dp_rank")


def rank_states(info: Any) -> list[tuple[int | None, float | None]] | None:
    """`internal_states`, one entry per DP rank as the server lists them: (the rank the
    state names, or None; its `avg_spec_accept_length`, or None when it has none). None
    when the server reports no `internal_states` list."""
    if not isinstance(info, Mapping) or not isinstance(info.get("internal_states"), list):
        return None
    states: list[tuple[int | None, float | None]] = []
    for state in info["internal_states"]:
        if not isinstance(state, Mapping):
            states.append((None, None))
            continue
        value = _first(state, SERVER_ACCEPT_KEYS)
        figure = float(value) if isinstance(value, int | float) and not isinstance(
            value, bool) and math.isfinite(value) else None
        states.append((_rank(_first(state, STATE_RANK_KEYS)), figure))
    return states


def ranks_kept_after_flush(info: Any) -> list[int]:
    """After `/flush_cache` answered 200, the DP ranks whose counters it did not reset.

    With several DP ranks the route fans out to every scheduler, each resetting only when
    it runs nothing (`Scheduler.flush_cache`, `is_fully_idle`), and answers with the first
    rank's result alone (`TokenizerControlMixin.flush_cache`: `results[0]`, 0.5.17 to
    0.5.23): a rank still finishing a warm-up request keeps its counters behind a 200. A
    reset rank reports no `avg_spec_accept_length` until a verify step is folded in again
    (`_average_accept_length` returns None while `spec_total_num_forward_ct` is 0), and
    nothing runs between the flush and this read; so a rank that still reports one was
    not reset. One rank: the answer is its own, nothing to check."""
    states = rank_states(info)
    if not states or len(states) < 2:
        return []
    return [position if rank is None else rank
            for position, (rank, figure) in enumerate(states) if figure is not None]


def server_figure(info: Any) -> float | None:
    """The server's own figure for one rank: `internal_states[0].avg_spec_accept_length`.
    With several DP ranks there is no pooled figure in `/server_info`; each rank's is read
    by `rank_states` and cross-checked rank by rank (harness.metrics.ranks)."""
    states = rank_states(info)
    if not states:
        return None
    return states[0][1] if len(states) == 1 else None


def identity(reports: Mapping[str, Any]) -> dict[str, Any]:
    """The build and deployment a server reports (`IDENTITY_PATHS`' answers): its version,
    the model it serves and its parallel sizes (None where it does not say)."""
    info = reports.get("/server_info")
    info = info if isinstance(info, Mapping) else {}
    model_info = reports.get("/get_model_info")
    model_info = model_info if isinstance(model_info, Mapping) else {}
    states = info.get("internal_states")
    return {"version": info.get("version"),
            "model": model_info.get("model_path") or info.get("model_path"),
            "tp_size": info.get("tp_size"), "pp_size": info.get("pp_size"),
            "nnodes": info.get("nnodes"),
            "dp_ranks": len(states) if isinstance(states, list) else None,
            "disaggregation_mode": info.get("disaggregation_mode")}


def settings_mismatches(info: Any, expected: Mapping[str, Any],
                        unreported_ok: str | None) -> list[str]:
    """Settings `/server_info` reports that differ from the suite's, or does not report.

    `expected`: server_info key -> declared value (None: the suite declares nothing).
    SGLang's own DFlash tests assert the same fields before measuring. A key the server
    does not report is a problem too, unless the suite says why it may be skipped.
    """
    if not isinstance(info, Mapping):
        return ["/server_info did not answer with a JSON object"]
    return mismatches(info, expected, unreported_ok, source="/server_info",
                      is_model=lambda key: key.endswith("model_path"),
                      equal=lambda got, value: str(got).upper() == str(value).upper())


# Tokens a verify step makes besides its correct drafts, per algorithm, from the release
# that introduced the value (SGLang's `GenerationBatchResult.num_non_draft_tokens_per_req`,
# managers/utils.py, default 1: the bonus token; 0.5.20 added UNO, whose worker
# speculative/uno_worker_v2.py returns `num_non_draft_tokens_per_req=2`). The server's
# counter adds `num_correct_drafts + batch_size * num_non_draft_tokens_per_req` per batch
# (`get_num_generated_tokens`), so server_avg is (Σcorrect + k Σverify) / Σverify.
# tests/sglang_oracle reads the constant from each release's wheel and pins this table.
NON_DRAFT_TOKENS_PER_STEP: dict[str, tuple[tuple[str, int], ...]] = {
    "UNO": (("0.5.20", 2),),
}


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", version)[:3])


def non_draft_tokens_per_step(algorithm: str | None, version: str | None) -> int:
    """SGLang `version`'s `num_non_draft_tokens_per_req` for `algorithm` (1 unless the
    table says otherwise; an unknown version takes the newest entry at or below it, and
    a missing one the newest entry)."""
    entries = NON_DRAFT_TOKENS_PER_STEP.get(str(algorithm or "").upper(), ())
    if not entries:
        return 1
    if not version or not _version_key(version):
        return entries[-1][1]
    key = _version_key(version)
    chosen = [value for since, value in entries if _version_key(since) <= key]
    return chosen[-1] if chosen else 1


def server_non_draft_tokens(info: Any, declared_algorithm: str | None) -> int:
    """The constant for the server `/server_info` describes (its `version` and resolved
    `speculative_algorithm`; the suite's algorithm when the server does not say)."""
    mapping = info if isinstance(info, Mapping) else {}
    algorithm = mapping.get("speculative_algorithm") or declared_algorithm
    version = mapping.get("version")
    return non_draft_tokens_per_step(algorithm, version if isinstance(version, str) else None)


def speculation_running(info: Any) -> list[str]:
    """Why a server meant to run the target alone runs speculation (`/server_info`'s
    `speculative_algorithm` set), else []."""
    algorithm = info.get("speculative_algorithm") if isinstance(info, Mapping) else None
    if algorithm:
        return [f"the target-alone server runs speculation: speculative_algorithm "
                f"{str(algorithm)[:100]!r}"]
    return []
