"""What every HTTP engine adapter does the same way: hand the request bodies, the answers
and the target-alone checks to its engine's own `api` and `stream` modules.

An adapter names its modules (`api`, `launch`, `stream`); its routes and flags are read from
them and the methods here forward to them, so the SGLang and vLLM adapters keep only what
differs between the engines.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, ClassVar, Protocol

from harness.engines.flags import without_flags
from harness.engines.interface import ParsedResponse, Placement

if TYPE_CHECKING:
    from pathlib import Path

    from harness.suite.checkpoints import Models
    from harness.suite.model import Suite


class EngineApi(Protocol):
    """An engine's `api` module: its routes, its request bodies and its answers, read."""

    READY_PATHS: tuple[str, ...]
    GENERATE_PATH: str
    CHAT_PATH: str
    IDENTITY_PATHS: tuple[str, ...]
    LIVENESS_PATH: str

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

    def settings_mismatches(self, info: object, expected: Mapping[str, object],
                            unreported_ok: str | None) -> list[str]: ...


class EngineLaunch(Protocol):
    """An engine's `launch` module: the flags the harness owns, checked in a suite."""

    RESERVED_FLAGS: frozenset[str]
    SECRET_FLAGS: frozenset[str]
    SPECULATIVE_FLAGS: frozenset[str]

    def check_flags(self, suite: Suite) -> None: ...

    def launch_command(self, suite: Suite, python: str, host: str, port: int,
                       models: Models | None = None,
                       placement: Placement | None = None) -> list[str]: ...


class EngineStream(Protocol):
    """An engine's `stream` module: the streamed form of a request."""

    def stream_body(self, body: Mapping[str, object], chat: bool) -> dict[str, object]: ...


class WireAdapter:
    """The forwarding half of an engine adapter (`harness.engines.interface.EngineAdapter`)."""

    api: ClassVar[EngineApi]
    launch: ClassVar[EngineLaunch]
    stream: ClassVar[EngineStream]
    speculative_flags: ClassVar[frozenset[str]]
    reserved_flags: ClassVar[frozenset[str]]
    secret_flags: ClassVar[frozenset[str]]
    ready_paths: ClassVar[tuple[str, ...]]
    generate_path: ClassVar[str]
    chat_path: ClassVar[str]
    identity_paths: ClassVar[tuple[str, ...]]
    liveness_path: ClassVar[str]

    def __init_subclass__(cls, **kwargs: object) -> None:
        """An adapter that names its engine's `api` and `launch` modules takes its routes
        and its flags from them (a subclass of it, the same unless it sets its own)."""
        super().__init_subclass__(**kwargs)
        own = vars(cls)
        if "api" in own:
            cls.ready_paths = cls.api.READY_PATHS
            cls.generate_path = cls.api.GENERATE_PATH
            cls.chat_path = cls.api.CHAT_PATH
            cls.identity_paths = cls.api.IDENTITY_PATHS
            cls.liveness_path = cls.api.LIVENESS_PATH
        if "launch" in own:
            cls.speculative_flags = cls.launch.SPECULATIVE_FLAGS
            cls.reserved_flags = cls.launch.RESERVED_FLAGS
            cls.secret_flags = cls.launch.SECRET_FLAGS

    def launch_command(self, suite: Suite, python: str, host: str, port: int,
                       models: Models | None = None,
                       checkpoints: tuple[Path, Path] | None = None,
                       placement: Placement | None = None) -> list[str]:
        return self.launch.launch_command(suite, python, host, port,
                                          self.models_to_serve(models, checkpoints), placement)

    def models_to_serve(self, models: Models | None,
                        checkpoints: tuple[Path, Path] | None) -> Models | None:
        """The models the launch line names: those given (None: the suite's, as the launch
        module resolves them)."""
        return models

    def expected_settings(self, suite: Suite, models: Models | None) -> dict[str, object]:
        """The server's resolved speculative settings, keyed as it reports them -> what the
        suite declares."""
        raise NotImplementedError

    def check_flags(self, suite: Suite) -> None:
        self.launch.check_flags(suite)

    def settings_mismatches(self, info: object, suite: Suite,
                            models: Models | None = None) -> list[str]:
        reason = getattr(suite.engine, "unreported_settings_ok", None)
        return self.api.settings_mismatches(info, self.expected_settings(suite, models), reason)

    def attention_from_server(self, info: object) -> list[dict[str, object]] | None:
        return None  # neither SGLang nor vLLM reports the draft's per-layer attention

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
