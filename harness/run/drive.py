"""Drive: send the workload to the server over HTTP, warm up, flush, then measure.

Engine-neutral: the adapter (harness.engines) names the routes, builds each request
body and reads each response. A workload's `protocol` picks the route: "completion"
sends each prompt's text as is (the adapter's generate route), "chat" sends the turns as
messages through the target's chat template (its chat route). A question with several
turns is one conversation: each later turn is sent with the model's own earlier answers
(stripped, as Spec-Bench appends them), and every turn is a measured request. Every
finished request is handed to `on_row` at once (the runner appends it to
requests.jsonl), so any exit path keeps what finished. While
requests run, a watchdog checks the server's process tree (an exit, a stopped process or
a dead child is noticed within a second, naming it: `launch.Server.death`) and progress:
no request finished for `progress_limit` seconds, a multiple of the slowest request
finished so far with a floor, `progress_timeout_s` at most (and until the first finishes),
ends the run as hung in seconds, not at the 10-minute request timeout.

Once `check_streaming` has read /server_info, every request is streamed
(harness.run.streaming) unless the adapter says the server cannot stream its counts
(`stream_refusal`): each row keeps when its
output arrived (`RequestRow.timing`), and the answer is assembled into the route's
unstreamed shape, so the counts are read by the same parser either way. Every row keeps
when it finished (`RequestRow.finished_s`); `measure_for` is `harness soak`'s measured
phase: the prompts over and over for a set time.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, TypeVar

from harness.engines.http_client import Client, TransportError, TransportTimeout
from harness.engines.interface import EngineAdapter, ParsedResponse
from harness.errors import TERMINATION, EngineError, Terminated, error_text
from harness.results.record import RequestRow, RequestTiming
from harness.run import streaming
from harness.run.dispatch import Dispatch, Progress, dispatch, drain, progress_limit
from harness.workloads import Prompt, grade, warmup_prompts

if TYPE_CHECKING:
    from harness.suite.entries import Workload

T = TypeVar("T")

FLUSH_ATTEMPTS = 20
FLUSH_RETRY_S = 0.5
WATCH_INTERVAL_S = 0.2
DEATH_GRACE_S = 1.0  # after a failed request, how long to wait for the process to be seen dead
UNCHECKED = "sent unstreamed: whether the server streams its counts was not checked"
TURN_SEED_STRIDE = 1_000_000  # a later turn's sampling seed: base + question + stride * turn


class StopRule(Protocol):
    """Sequential stopping: the rule looks at fixed request counts and may settle early."""

    def looks(self, max_n: int) -> list[int]: ...

    def decide_rows(self, rows: Sequence[RequestRow]) -> str | None: ...


@dataclass
class DriveResult:
    rows: list[RequestRow]
    duration_s: float
    planned: int  # requests the workload plans (a question with two turns is two)
    stopped_early: bool = False
    settled_as: str | None = None
    looks: list[int] = field(default_factory=list)
    # questions (data rows) in flight when the rule settled: cancelled, never finished
    cancelled: list[int] = field(default_factory=list)
    unfinished: int = 0  # planned questions with no finished row


@dataclass
class Endpoint:
    """A running server as the driver talks to it."""

    base_url: str
    adapter: EngineAdapter
    headers: dict[str, str] = field(default_factory=dict)
    admin_headers: dict[str, str] = field(default_factory=dict)  # for /flush_cache
    # None while the server process lives, else what happened ("server exited with ...").
    liveness: Callable[[], str | None] = lambda: None


def sampling_params(workload: Workload, question_index: int, stop: Sequence[str] = (),
                    turn: int = 0) -> dict[str, object]:
    """SGLang sampling params of one request. `top_k` only when set; a seed only when
    sampling (temperature > 0): base + question index (+ TURN_SEED_STRIDE per later turn),
    so a sampled run is repeatable request by request."""
    params: dict[str, object] = {
        "max_new_tokens": workload.max_tokens,
        "temperature": workload.temperature,
        "top_p": workload.top_p,
    }
    if stop:
        params["stop"] = list(stop)
    if workload.top_k != -1:
        params["top_k"] = workload.top_k
    if workload.temperature > 0:
        # Seeded sampling makes sampled runs repeatable (SGLang's `sampling_seed`).
        params["sampling_seed"] = (workload.seed_base + question_index
                                   + TURN_SEED_STRIDE * turn)
    return params


def messages(workload: Workload, prompt: Prompt, answers: Sequence[str]) -> list[dict[str, str]]:
    """The chat messages of the turn after `answers`: the system prompt, then each turn's
    user message and the model's answer to it, then this turn's user message."""
    out = [{"role": "system", "content": workload.system_prompt}] if workload.system_prompt \
        else []
    for turn, answer in zip(prompt.turns, answers, strict=False):
        out += [{"role": "user", "content": turn}, {"role": "assistant", "content": answer}]
    out.append({"role": "user", "content": prompt.turns[len(answers)]})
    return out


def first_turn(workload: Workload, prompt: Prompt) -> str | list[dict[str, str]]:
    """What the first request of `prompt` sends: its text, or its chat messages."""
    return messages(workload, prompt, []) if workload.protocol == "chat" else prompt.text


@dataclass(frozen=True)
class Answer:
    """One request's answer: its counts, its latency (sending to the end of the answer)
    and when its output arrived."""

    parsed: ParsedResponse
    latency_s: float
    timing: RequestTiming


def _row(index: int, prompt: Prompt, turn: int, answer: Answer,
         non_draft_tokens: int = 1, finished_s: float | None = None) -> RequestRow:
    parsed = answer.parsed
    predicted, correct = grade(prompt, parsed.text) if turn == len(prompt.turns) - 1 \
        else (None, None)
    return RequestRow(
        index=index,
        question_index=prompt.question_index,
        category=prompt.category,
        subcategory=prompt.subcategory,
        question_id=prompt.question_id,
        turn=turn,
        prompt_sha256=parsed.prompt_sha256,
        completion_tokens=parsed.completion_tokens,
        verify_steps=parsed.verify_steps,
        correct_drafts=parsed.correct_drafts,
        non_draft_tokens_per_step=non_draft_tokens,
        spec_accept_length=(parsed.completion_tokens / parsed.verify_steps
                            if parsed.verify_steps else 0.0),
        accept_histogram=parsed.histogram,
        prompt_tokens=parsed.prompt_tokens,
        latency_s=answer.latency_s,
        finish_reason=parsed.finish_reason,
        predicted=predicted,
        expected=prompt.label,
        correct=correct,
        output=parsed.text,
        timing=answer.timing,
        dp_rank=parsed.dp_rank,
        finished_s=finished_s,
    )


async def _all(coroutines: Sequence[Awaitable[T]]) -> list[T]:
    """Await every coroutine; on the first failure (or a cancel) cancel the rest."""
    tasks = [asyncio.ensure_future(c) for c in coroutines]
    try:
        return await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            if not task.done():
                task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


class Driver:
    """One server, one workload: warm-up, flush, measured phase."""

    def __init__(self, endpoint: Endpoint, workload: Workload, stop: Sequence[str] = ()) -> None:
        self.endpoint, self.workload, self.stop = endpoint, workload, tuple(stop)
        self.adapter = endpoint.adapter
        # tokens a verify step makes besides its correct drafts (set from /server_info)
        self.non_draft_tokens = 1
        self.chat = workload.protocol == "chat"
        # An engine whose counters cannot be reset (vLLM): the reading the measured window
        # starts from, taken where the flush would be.
        self.window_start: object = None
        # None: stream every request; else why the server's requests go unstreamed
        self.unstreamed: str | None = UNCHECKED
        self.clock: streaming.Clock = time.perf_counter

    @property
    def route(self) -> str:
        return self.adapter.chat_path if self.chat else self.adapter.generate_path

    def client(self, concurrency: int | None = None, timeout: float | None = None) -> Client:
        """The server's client (harness.engines.http_client): one connection per request in
        flight, no proxy from the environment, the workload's request timeout."""
        return Client(self.endpoint.base_url, concurrency or self.workload.concurrency,
                      timeout or self.workload.request_timeout_s, self.endpoint.headers)

    async def _failed(self, what: str, error: BaseException) -> EngineError:
        """The error to raise for a failed request: the server's death if that is the cause."""
        deadline = time.monotonic() + DEATH_GRACE_S
        while time.monotonic() < deadline:
            if (death := self.endpoint.liveness()) is not None:
                return EngineError(f"{death} (while waiting for {what})")
            await asyncio.sleep(0.05)
        if isinstance(error, EngineError):  # the server's own answer, as it gave it
            return error
        if isinstance(error, TransportTimeout):
            return EngineError(f"{what} timed out after {self.workload.request_timeout_s:g} s")
        return EngineError(f"{what} failed: {error_text(error)}")

    def body(self, prompt: Prompt, answers: Sequence[str], rid: str) -> dict[str, object]:
        """The request for the turn after `answers` (the model's earlier answers)."""
        params = sampling_params(self.workload, prompt.question_index, self.stop, len(answers))
        if self.chat:
            return self.adapter.chat_body(messages(self.workload, prompt, answers), params,
                                          rid, self.workload.chat_template_kwargs)
        return self.adapter.generate_body(prompt.turns[len(answers)], params, rid)

    def check_streaming(self, info: object) -> None:
        """Whether this server (its /server_info) streams the route with its counts."""
        refusal = getattr(self.adapter, "stream_refusal", None)
        self.unstreamed = refusal(info, self.chat) if refusal is not None else \
            "this engine's adapter does not stream"

    async def generate(self, client: Client, prompt: Prompt, rid: str,
                       answers: Sequence[str] = ()) -> Answer:
        path = self.route
        body = self.body(prompt, answers, rid)
        if self.unstreamed is None:
            try:
                received = await streaming.receive(
                    client, path, self.adapter.stream_body(body, self.chat),
                    self.adapter.stream_assembler(self.chat), f"request {rid}", self.clock)
            except TransportError as error:
                raise await self._failed(f"{path} for request {rid}", error) from None
            return self._answer(received.payload, path, rid, received.latency_s,
                                received.timing)
        started = time.perf_counter()
        try:
            response = await client.post(path, body)
        except TransportError as error:
            raise await self._failed(f"{path} for request {rid}", error) from None
        latency = time.perf_counter() - started
        if response.status_code != 200:
            answered = EngineError(f"{path} answered {response.status_code} for request {rid}: "
                                   f"{response.text[:500] or '(empty body)'}")
            if response.status_code >= 500:  # a server being stopped (a scheduler cancelling
                raise await self._failed(path, answered)  # its job) may answer 5xx first
            raise answered
        try:
            payload = response.json()
        except ValueError:
            raise EngineError(f"{path} answered non-JSON for {rid}: "
                              f"{response.text[:200]!r}") from None
        return self._answer(payload, path, rid, latency,
                            RequestTiming(streamed=False, note=self.unstreamed))

    def _answer(self, payload: object, path: str, rid: str, latency: float,
                timing: RequestTiming) -> Answer:
        parse = self.adapter.parse_chat if self.chat else self.adapter.parse_generate
        parsed = parse(payload, f"{path} ({rid})")
        # An engine whose stop strings the harness applies (vLLM: harness.engines.vllm.stops)
        cut = getattr(self.adapter, "cut_at_stop", None)
        if cut is not None:
            parsed = cut(parsed, payload, self.stop, f"{path} ({rid})", chat=self.chat)
            timing = streaming.cut_timing(timing, parsed.completion_tokens)
        return Answer(parsed, latency, timing)

    async def conversation(self, client: Client, prompt: Prompt, rid: str,
                           on_turn: Callable[[int, Answer], None] | None = None
                           ) -> list[ParsedResponse]:
        """Every turn of `prompt`, each sent with the model's own earlier answers."""
        answers: list[str] = []
        parsed_turns = []
        for turn in range(len(prompt.turns)):
            suffix = f"-t{turn}" if turn else ""
            answer = await self.generate(client, prompt, rid + suffix, answers)
            answers.append(answer.parsed.text.strip())
            parsed_turns.append(answer.parsed)
            if on_turn is not None:
                on_turn(turn, answer)
        return parsed_turns

    async def warm_up(self, prompts: Sequence[Prompt]) -> None:
        """Warm-up requests; they also prove the figures are there before measuring."""
        async with self.client() as client:
            await self._watched(_all([
                self.conversation(client, p, f"warmup-{i}") for i, p in enumerate(prompts)]))

    async def warm_up_then_flush(self, prompts: Sequence[Prompt]) -> None:
        """The workload's warm-up requests from `prompts` (none measured), then the
        counters reset (`flush`): what a measurement starts from."""
        warm = warmup_prompts(list(prompts), self.workload.warmup_requests)
        if warm:
            await self.warm_up(warm)
        await self.flush()

    async def flush(self) -> None:
        """Reset the server's counters; SGLang refuses while requests run, so retry. An
        engine with no reset (`flush_path` None) has its counters read here instead."""
        path, last = self.adapter.flush_path, ""
        if path is None:
            self.window_start = await self.server_info()
            return
        async with self.client(1, timeout=30.0) as client:
            for _ in range(FLUSH_ATTEMPTS):
                try:
                    response = await client.post(path, headers=self.endpoint.admin_headers)
                except TransportError as error:
                    raise await self._failed(path, error) from None
                if response.status_code == 200:
                    kept = await self._ranks_kept_after_flush()
                    if not kept:
                        return
                    last = (f"200, but DP rank {', '.join(map(str, kept))} kept its counters: "
                            "the answer speaks for the first rank only")
                elif response.status_code in (401, 403):
                    raise EngineError(f"the server refused {path} ({response.status_code} "
                                      f"{response.text[:200]}): it is an admin route; give "
                                      "the server's --admin-api-key (or --api-key) in the "
                                      "suite's extra_args so the harness can send it")
                else:
                    last = f"{response.status_code} {response.text[:200]}"
                await asyncio.sleep(FLUSH_RETRY_S)
        raise EngineError(f"{path} did not reset the server's counters in "
                          f"{FLUSH_ATTEMPTS * FLUSH_RETRY_S:g} s (last answer: {last}); the "
                          "server never became idle")

    async def _ranks_kept_after_flush(self) -> list[int]:
        """The DP ranks whose counters a flush that answered 200 left in place, as the
        server's own state shows them (an engine that cannot tell: none)."""
        kept = getattr(self.adapter, "ranks_kept_after_flush", None)
        return [] if kept is None else list(kept(await self.server_info()))

    async def server_info(self) -> object:
        read = getattr(self.adapter, "read_server_info", None)
        if read is not None:  # an engine that reads its own (e.g. /metrics, a window)
            async with self.client(1, timeout=30.0) as client:
                try:
                    return await read(client, self.window_start)
                except TransportError as error:
                    raise await self._failed("reading the server's figures", error) from None
        async with self.client(1, timeout=30.0) as client:
            for path in self.adapter.server_info_paths:
                try:
                    response = await client.get(path)
                except TransportError:
                    continue
                if response.status_code == 200:
                    try:
                        return response.json()
                    except ValueError:
                        return None
        return None

    async def _watched(self, work: Awaitable[T], progress: Progress | None = None) -> T:
        """Await `work`, ending it when the server dies or (with `progress`) when nothing
        finishes for `progress_limit` seconds."""
        task = asyncio.ensure_future(work)
        cap = self.workload.progress_timeout_s
        try:
            while True:
                done, _ = await asyncio.wait({task}, timeout=WATCH_INTERVAL_S)
                if done:
                    return task.result()
                if TERMINATION.signum is not None:  # a SIGTERM whose raise was swallowed
                    raise Terminated(TERMINATION.signum)
                if (death := self.endpoint.liveness()) is not None:
                    await drain(task, progress)
                    raise EngineError(death)
                limit = progress_limit(cap, progress.slowest) if progress else cap
                if progress is not None and time.monotonic() - progress.last > limit:
                    raise EngineError(f"no progress for {limit:.3g} s: no request finished "
                                      f"({progress.why(cap)}); the server looks hung")
        finally:
            if not task.done():
                task.cancel()
                # its own end, not a Ctrl-C or SIGTERM arriving meanwhile
                with contextlib.suppress(Exception, asyncio.CancelledError):
                    await task

    async def measure(self, prompts: Sequence[Prompt],
                      on_row: Callable[[RequestRow], None] | None = None,
                      stop_rule: StopRule | None = None) -> DriveResult:
        """Send the prompts in order with `concurrency` in flight; rows in submission order.

        Continuous dispatch: a slot that frees takes the next prompt at once. With a stop
        rule, each of the rule's looks comes when every prompt before it (in dispatch
        order) has finished; the rule sees exactly those rows, as a wave protocol would,
        and may settle the verdict. Then the requests still in flight are cancelled (named
        in `cancelled`), and every row that finished, before or after the look, is kept.
        """
        n = len(prompts)
        looks = stop_rule.looks(n) if stop_rule else [n]
        rows: dict[int, RequestRow] = {}
        first_row = [0]  # row index of each prompt's first turn: turns follow in order
        for prompt in prompts:
            first_row.append(first_row[-1] + len(prompt.turns))
        progress = Progress()
        started = time.perf_counter()
        state = Dispatch()

        async with self.client() as client:

            async def one(index: int) -> None:
                prompt = prompts[index]

                def finished(turn: int, answer: Answer) -> None:
                    row = _row(first_row[index] + turn, prompt, turn, answer,
                               self.non_draft_tokens, time.perf_counter() - started)
                    rows[row.index] = row
                    progress.finished(answer.latency_s)
                    if on_row is not None:
                        on_row(row)

                await self.conversation(client, prompt, f"q{prompt.question_index}", finished)

            def look(at: int) -> str | None:
                if stop_rule is None or at >= n:
                    return None
                return stop_rule.decide_rows([rows[i] for i in range(first_row[at])])

            past_look = None if stop_rule is None else self.workload.sequential_in_flight
            await self._watched(dispatch(n, self.workload.concurrency, one, looks, look, state,
                                         progress, past_look), progress)
        settled = state.settled
        if stop_rule is not None and settled is None:
            settled = stop_rule.decide_rows([rows[i] for i in sorted(rows)])
        ordered = [rows[i] for i in sorted(rows)]
        finished_questions = {row.question_index for row in ordered}
        return DriveResult(ordered, time.perf_counter() - started, first_row[-1],
                           stopped_early=state.sent < n or bool(state.cancelled),
                           settled_as=settled, looks=state.taken,
                           cancelled=[prompts[i].question_index for i in state.cancelled],
                           unfinished=len({prompts[i].question_index for i in range(n)}
                                          - finished_questions))

    async def measure_for(self, prompts: Sequence[Prompt], seconds: float,
                          on_row: Callable[[RequestRow], None] | None = None) -> DriveResult:
        """The soak's measured phase (`harness soak`): the prompts in order, over and over,
        `concurrency` in flight, a new one sent only while less than `seconds` have passed
        since the start; those in flight then finish and are kept. Every row carries when
        it finished (`finished_s`), so the rows fall into windows of serving time. Repeats
        are the same requests (the same sampling seeds): only the server has changed."""
        rows: list[RequestRow] = []
        progress = Progress()
        started = time.perf_counter()
        deadline = started + seconds
        sent = 0  # requests (questions) sent, across passes
        next_row = 0

        async with self.client() as client:

            async def slot() -> None:
                nonlocal sent, next_row
                while time.perf_counter() < deadline and not progress.halted:
                    position, first = sent, next_row
                    prompt = prompts[position % len(prompts)]
                    sent, next_row = sent + 1, next_row + len(prompt.turns)

                    def finished(turn: int, answer: Answer, prompt: Prompt = prompt,
                                 first: int = first) -> None:
                        row = _row(first + turn, prompt, turn, answer, self.non_draft_tokens,
                                   time.perf_counter() - started)
                        rows.append(row)
                        progress.finished(answer.latency_s)
                        if on_row is not None:
                            on_row(row)

                    # a request id of its own each pass: a server may refuse a repeated one
                    await self.conversation(
                        client, prompt, f"q{prompt.question_index}-p{position // len(prompts)}",
                        finished)

            await self._watched(_all([slot() for _ in range(self.workload.concurrency)]),
                                progress)
        ordered = sorted(rows, key=lambda row: row.index)
        return DriveResult(ordered, time.perf_counter() - started, next_row)
