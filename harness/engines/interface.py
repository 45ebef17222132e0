"""The engine interface: what the pipeline asks of an adapter, and what a response becomes.

Light to import: no third-party package is imported here.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from harness.errors import EngineError, MissingMetric

if TYPE_CHECKING:
    from pathlib import Path

    from harness.suite.checkpoints import Models
    from harness.suite.model import Suite


@dataclass(frozen=True)
class Placement:
    """Which process of a topology a launch line is for: node `node_rank` of `nnodes`
    (rendezvous at node 0's `dist_init_addr`, host:port), on one side of a prefill/decode
    split (`side`: "serve", "prefill" or "decode"; a split's sides meet at the prefill
    side's `bootstrap_port`)."""

    node_rank: int = 0
    nnodes: int = 1
    dist_init_addr: str | None = None
    side: str = "serve"
    bootstrap_port: int | None = None


@dataclass(frozen=True)
class ParsedResponse:
    """One generation response as the harness needs it, whatever the engine."""

    text: str
    completion_tokens: int
    verify_steps: int
    correct_drafts: int | None  # accepted draft tokens over all verify steps (bonus excluded)
    histogram: list[int] | None  # verify steps by number of correct drafts
    prompt_tokens: int | None
    finish_reason: str | None
    prompt_sha256: str | None = None  # of the server's prompt token ids, when it returns them
    dp_rank: int | None = None  # the data-parallel rank that served it, when the server says


@dataclass(frozen=True)
class StreamPiece:
    """What one streamed event brought: generated output or not, and how many output
    tokens when the stream says (None: output of an unstated token count)."""

    output: bool
    tokens: int | None = None


NOTHING = StreamPiece(False, 0)


class StreamAssembler(Protocol):
    """Turns one request's streamed events (each a parsed `data:` JSON value, in order)
    into the response the route answers unstreamed, so the adapter's own parser reads the
    counts exactly as it reads an unstreamed answer."""

    def feed(self, event: object) -> StreamPiece: ...

    def payload(self) -> object: ...


def prompt_ids_sha256(ids: object) -> str | None:
    """`ParsedResponse.prompt_sha256`: sha256 of a prompt's token ids as the server returns
    them (compact JSON list), None if they are not ids."""
    if not isinstance(ids, list) or not all(isinstance(i, int) and not isinstance(i, bool)
                                            for i in ids):
        return None
    return hashlib.sha256(json.dumps(ids, separators=(",", ":")).encode()).hexdigest()


def stream_error(event: object) -> str | None:
    """The server's message when `event` is an error event, else None."""
    if not isinstance(event, Mapping):
        return None
    error = event.get("error")
    if isinstance(error, Mapping):
        return str(error.get("message") or error)
    if error is not None:
        return str(error)
    if event.get("object") == "error":  # an OpenAI-route ErrorResponse
        return str(event.get("message") or event)
    return None


def checked_event(event: object) -> Mapping[str, object]:
    """A streamed event as a JSON object; EngineError where it is the server's error event
    or not an object."""
    message = stream_error(event)
    if message is not None:
        raise EngineError(f"the server ended the stream with an error: {message[:500]}")
    if not isinstance(event, Mapping):
        raise EngineError(f"a streamed event is not a JSON object: {event!r:.200}")
    return event


def first_choice(event: Mapping[str, object]) -> Mapping[str, object] | None:
    """A streamed OpenAI-style event's first choice, None where it carries none."""
    choices = event.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
        return None
    return choices[0]


def only_choice(payload: object, where: str) -> Mapping[str, object]:
    """The one choice of an OpenAI-style answer (`{"choices": [{...}]}`), MissingMetric
    where the answer is not a JSON object with exactly one."""
    if not isinstance(payload, Mapping):
        raise MissingMetric(f"{where}: expected a JSON object, got {type(payload).__name__}")
    choices = payload.get("choices")
    if not isinstance(choices, list) or len(choices) != 1 or not isinstance(choices[0],
                                                                          Mapping):
        raise MissingMetric(f"{where}: expected one choice, got {choices!r:.200}")
    return choices[0]


class EngineAdapter(Protocol):
    """What the pipeline asks of an engine."""

    kind: str
    ready_paths: tuple[str, ...]  # GET until 200, in order
    generate_path: str
    chat_path: str  # renders the target's chat template and returns per-request figures
    flush_path: str
    server_info_paths: tuple[str, ...]  # first that answers 200 wins
    # The engine's own flags, resolved as its argparse parser resolves them (prefixes
    # included, harness.secrets.resolve_flag): owned by the harness (refused in
    # extra_args) and secret (their values redacted in every output): each adapter declares
    # its own, once; harness.engines.registry makes the union of every engine's.
    reserved_flags: frozenset[str]
    secret_flags: frozenset[str]

    def check_flags(self, suite: Suite) -> None:
        """BadInput when the suite's extra_args set an owned flag or abbreviate a secret
        one: what a run's preparation checks, and `harness validate` with it."""

    def launch_command(self, suite: Suite, python: str, host: str, port: int,
                       models: Models | None = None,
                       checkpoints: tuple[Path, Path] | None = None,
                       placement: Placement | None = None) -> list[str]: ...

    def target_alone_command(self, command: Sequence[str]) -> list[str]:
        """The launch line `command` serving the target alone ([speedup]): the same line
        less the flags that turn speculation on (harness.run.baseline)."""

    def target_alone_mismatches(self, info: object) -> list[str]:
        """Why a server meant to run the target alone runs speculation, else []."""

    def parse_target_alone(self, payload: object, where: str, chat: bool) -> ParsedResponse:
        """An answer of the target alone: its tokens, 0 verify steps, no spec counts."""

    def generate_body(self, text: str, params: Mapping[str, object],
                      rid: str) -> dict[str, object]: ...

    def parse_generate(self, payload: object, where: str) -> ParsedResponse: ...

    def chat_body(self, messages: Sequence[Mapping[str, str]], params: Mapping[str, object],
                  rid: str, template_kwargs: Mapping[str, object]) -> dict[str, object]: ...

    def parse_chat(self, payload: object, where: str) -> ParsedResponse: ...

    def stream_body(self, body: Mapping[str, object], chat: bool) -> dict[str, object]:
        """`body` (from generate_body or chat_body) asking for a stream of events that ends
        with the counts the unstreamed answer carries."""

    def stream_assembler(self, chat: bool) -> StreamAssembler: ...

    def stream_refusal(self, info: object, chat: bool) -> str | None:
        """Why this server (its `server_info`) cannot stream a route with the per-request
        counts (then requests go unstreamed, counts exact, no TTFT or gaps), else None."""

    def server_figure(self, info: object) -> float | None: ...

    def settings_mismatches(self, info: object, suite: Suite,
                            models: Models | None = None) -> list[str]: ...

    def attention_from_server(self, info: object) -> list[dict[str, object]] | None: ...

    def auth_headers(self, suite: Suite, admin: bool = False) -> dict[str, str]: ...

    # A server the harness did not launch (`--server URL`, harness.run.attach): the routes
    # whose JSON answers say what it runs, the one that says it is alive, and what they say.
    identity_paths: tuple[str, ...]
    liveness_path: str

    def identity(self, reports: Mapping[str, object]) -> dict[str, object]:
        """The build and deployment the server reports (its version, the model it serves,
        its parallel sizes; None where it does not say), from `identity_paths`' answers."""
