"""The CPU reference engine's adapter: its own launch line, SGLang 0.5.23's API.

The engine (`python -m harness.engines.reference`) serves the subset of SGLang's API
the harness uses, with SGLang's response shapes, so everything after the launch line is
the SGLang adapter's (`harness.engines.sglang.api`); it also reports the draft's
per-layer attention as it applied it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.engines import Models, ParsedResponse
from harness.engines.flags import check_extra_args
from harness.engines.sglang import api
from harness.engines.sglang.launch import api_key
from harness.errors import BadInput
from harness.suite import ReferenceEngine, Suite

LAUNCH_MODULE = "harness.engines.reference"
RESERVED_FLAGS = frozenset({"--host", "--port", "--target", "--draft", "--attention-policy",
                            "--draft-noise", "--seed", "--block-size"})
RESERVED_WHY = ("set the suite's engine.attention_policy, engine.draft_noise, "
                "workload.seed or speculative.block_size instead")


def launch_command(suite: Suite, python: str, host: str, port: int,
                   target: Path, draft: Path) -> list[str]:
    engine = suite.engine
    if not isinstance(engine, ReferenceEngine):
        raise BadInput(f"suite {suite.name}: not a reference-engine suite")
    check_extra_args(suite.name, engine.extra_args, RESERVED_FLAGS, RESERVED_WHY)
    command = [
        python, "-m", LAUNCH_MODULE,
        "--target", str(target),
        "--draft", str(draft),
        "--host", host,
        "--port", str(port),
        "--attention-policy", engine.attention_policy,
        "--draft-noise", f"{engine.draft_noise:g}",
        "--seed", str(suite.workload.seed),
    ]
    if suite.speculative.draft_tokens is not None:
        command += ["--block-size", str(suite.speculative.draft_tokens)]
    return command + list(engine.extra_args)


class ReferenceAdapter:
    kind = "reference"
    ready_paths = api.READY_PATHS
    generate_path = api.GENERATE_PATH
    chat_path = api.CHAT_PATH
    flush_path = api.FLUSH_PATH
    server_info_paths = api.SERVER_INFO_PATHS

    def launch_command(self, suite: Suite, python: str, host: str, port: int,
                       models: Models | None = None,
                       checkpoints: tuple[Path, Path] | None = None) -> list[str]:
        if checkpoints is None:
            raise BadInput(f"suite {suite.name}: the reference engine needs checkpoint folders")
        return launch_command(suite, python, host, port, *checkpoints)

    def generate_body(self, text: str, params: Mapping[str, Any], rid: str) -> dict[str, Any]:
        return api.generate_body(text, params, rid)

    def parse_generate(self, payload: Any, where: str) -> ParsedResponse:
        return api.parse_generate(payload, where)

    def chat_body(self, messages: Sequence[Mapping[str, str]], params: Mapping[str, Any],
                  rid: str, template_kwargs: Mapping[str, Any]) -> dict[str, Any]:
        return api.chat_body(messages, params, rid, template_kwargs)

    def parse_chat(self, payload: Any, where: str) -> ParsedResponse:
        return api.parse_chat(payload, where)

    def server_figure(self, info: Any) -> float | None:
        return api.server_figure(info)

    def settings_mismatches(self, info: Any, suite: Suite,
                            models: Models | None = None) -> list[str]:
        expected: dict[str, Any] = {
            "speculative_algorithm": suite.speculative.algorithm,
            "speculative_num_draft_tokens": suite.speculative.draft_tokens,
        }
        if models is not None:
            expected["speculative_draft_model_path"] = models.draft
        return api.settings_mismatches(info, expected, None)

    def attention_from_server(self, info: Any) -> list[dict[str, Any]] | None:
        layers = info.get("attention_layers") if isinstance(info, Mapping) else None
        return layers if isinstance(layers, list) else None

    def auth_headers(self, suite: Suite) -> dict[str, str]:
        key = api_key(suite)
        return {"Authorization": f"Bearer {key}"} if key else {}


ADAPTER = ReferenceAdapter()
