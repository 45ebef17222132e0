"""The SGLang adapter: every fact about SGLang the harness depends on lives in this package.

`launch.py`: the launch line and the flags the harness owns; `api.py`: readiness,
endpoints, request bodies, response parsing (both accept-length definitions' counts),
the server's own figure and the settings check. Each names where to read the fact in
SGLang's source, so it can be re-checked against any release (tests/sglang_oracle runs
SGLang's own functions from its wheels against them).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, ClassVar

from harness.engines.interface import StreamAssembler
from harness.engines.sglang import api, launch, release_check, stream
from harness.engines.sglang.launch import RESERVED_FLAGS, launch_command
from harness.engines.wire_adapter import EngineApi, EngineLaunch, EngineStream, WireAdapter
from harness.errors import BadInput
from harness.suite.checkpoints import Models, resolve_models

if TYPE_CHECKING:
    from harness.suite.model import Suite

__all__ = ["ADAPTER", "RESERVED_FLAGS", "SGLangAdapter", "launch_command"]


def _served(suite: Suite, models: Models | None) -> Models:
    """The models the server was asked to serve: those given, else the suite's."""
    served = models or resolve_models(suite)
    if served is None:
        raise BadInput(f"suite {suite.name}: no target and draft to serve")
    return served


class SGLangAdapter(WireAdapter):
    kind = "sglang"
    flush_path = api.FLUSH_PATH
    server_info_paths = api.SERVER_INFO_PATHS
    # the modules as WireAdapter reads them (after the constants read from them above)
    api: ClassVar[EngineApi] = api
    launch: ClassVar[EngineLaunch] = launch
    stream: ClassVar[EngineStream] = stream

    def stream_assembler(self, chat: bool) -> StreamAssembler:
        return stream.ChatStream() if chat else stream.GenerateStream()

    def stream_refusal(self, info: object, chat: bool) -> str | None:
        return stream.stream_refusal(info, chat)

    def server_rank_states(self, info: object) -> list[tuple[int | None, float | None]] | None:
        """Each DP rank's own figure from `/server_info` (harness.metrics.ranks)."""
        return api.rank_states(info)

    def ranks_kept_after_flush(self, info: object) -> list[int]:
        """The DP ranks a flush that answered 200 did not reset (the driver flushes again)."""
        return api.ranks_kept_after_flush(info)

    def chat_template_override(self, suite: Suite) -> str | None:
        return api.chat_template_flag(getattr(suite.engine, "extra_args", []))

    def expected_settings(self, suite: Suite, models: Models | None) -> dict[str, object]:
        """`/server_info` key -> what the suite declares (SGLang's resolved server args)."""
        return {
            "speculative_algorithm": suite.speculative.algorithm,
            "speculative_draft_model_path": _served(suite, models).draft,
            "speculative_num_draft_tokens": suite.speculative.draft_tokens,
        }

    def non_draft_tokens_per_step(self, info: object, suite: Suite) -> int:
        """Tokens each verify step makes besides its correct drafts (UNO: 2)."""
        return api.server_non_draft_tokens(info, suite.speculative.algorithm)

    def check_release(self, suite: Suite, python: str, lines: Mapping[str, Sequence[str]],
                      env: Mapping[str, str], version: str | None) -> None:
        """The build's own parser and resolution over each launch line of a multi-rank
        topology: BadInput (exit 2) with the release's message where it refuses one."""
        argvs = {name: list(line[3:]) for name, line in lines.items()}  # after -m module
        answers = release_check.probe(python, list(argvs.values()), env)
        topology = suite.topology
        expected = {name: {"tp_size": topology.sides[side].tp_size,
                           "pp_size": topology.sides[side].pp_size,
                           "dp_ranks": topology.sides[side].dp_size,
                           "nnodes": topology.nnodes}
                    for name, side in ((name, _side_of(name)) for name in argvs)}
        release_check.check(suite.name, version, topology.parallel_text(), argvs, answers,
                            expected)

    def auth_headers(self, suite: Suite, admin: bool = False) -> dict[str, str]:
        """Headers for ordinary routes, or (`admin`) for admin routes such as /flush_cache."""
        key = launch.api_key(suite, admin)
        return {"Authorization": f"Bearer {key}"} if key else {}


def _side_of(line_name: str) -> str:
    """`decode node 1` -> decode; `server`, `node 1` -> serve."""
    first = line_name.split(" ", 1)[0]
    return first if first in ("prefill", "decode") else "serve"


ADAPTER = SGLangAdapter()
