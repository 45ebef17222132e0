"""What every HTTP engine adapter does the same way: hand the request bodies, the answers
and the target-alone checks to its engine's own `api` and `stream` modules.

An adapter names its modules and its speculative flags; the methods here forward to them,
so the SGLang and vLLM adapters keep only what differs between the engines.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import ClassVar, Protocol

from harness.engines.flags import without_flags
from harness.engines.interface import ParsedResponse


class EngineApi(Protocol):
    """An engine's `api` module: its request bodies and its answers, read."""

    def generate_body(self, text: str, params: Mapping[str, object], rid: str
                      ) -> dict[str, object]: ...

    def chat_body(self, messages: Sequence[Mapping[str, str]], params: Mapping[str, object],
                  rid: str, template_kwargs: Mapping[str, object]) -> dict[str, object]: ...

    def parse_generate(self, payload: object, where: str, speculative: bool = True
                       ) -> ParsedResponse: ...

    def parse_chat(self, payload: object, where: str, speculative: bool = True
                   ) -> ParsedResponse: ...

    def speculation_running(self, info: object) -> list[str]: ...

    def server_figure(self, info: object) -> float | None: ...

    def identity(self, reports: Mapping[str, object]) -> dict[str, object]: ...


class EngineStream(Protocol):
    """An engine's `stream` module: the streamed form of a request."""

    def stream_body(self, body: Mapping[str, object], chat: bool) -> dict[str, object]: ...


class WireAdapter:
    """The forwarding half of an engine adapter (`harness.engines.interface.EngineAdapter`)."""

    api: ClassVar[EngineApi]
    stream: ClassVar[EngineStream]
    speculative_flags: ClassVar[frozenset[str]]

    def target_alone_command(self, command: Sequence[str]) -> list[str]:
        """The launch line `command` without speculation ([speedup]): every speculative
        flag the harness set dropped, the rest (the build's serving flags) as it was."""
        return without_flags(command, self.speculative_flags)

    def target_alone_mismatches(self, info: object) -> list[str]:
        """The target-alone server must run no speculation (its resolved speculative
        settings unset)."""
        return self.api.speculation_running(info)

    def parse_target_alone(self, payload: object, where: str, chat: bool) -> ParsedResponse:
        """An answer of the target alone: its tokens, no spec counts (none are sent)."""
        parse = self.api.parse_chat if chat else self.api.parse_generate
        return parse(payload, where, speculative=False)

    def generate_body(self, text: str, params: Mapping[str, object], rid: str
                      ) -> dict[str, object]:
        return self.api.generate_body(text, params, rid)

    def parse_generate(self, payload: object, where: str) -> ParsedResponse:
        return self.api.parse_generate(payload, where)

    def chat_body(self, messages: Sequence[Mapping[str, str]], params: Mapping[str, object],
                  rid: str, template_kwargs: Mapping[str, object]) -> dict[str, object]:
        return self.api.chat_body(messages, params, rid, template_kwargs)

    def parse_chat(self, payload: object, where: str) -> ParsedResponse:
        return self.api.parse_chat(payload, where)

    def stream_body(self, body: Mapping[str, object], chat: bool) -> dict[str, object]:
        return self.stream.stream_body(body, chat)

    def server_figure(self, info: object) -> float | None:
        return self.api.server_figure(info)

    def identity(self, reports: Mapping[str, object]) -> dict[str, object]:
        """What the server reports of its build and deployment (`--server URL`)."""
        return self.api.identity(reports)
