"""The server-side engine: a pool of decoding workers and SGLang's server-wide state.

HTTP handler threads call `generate`; it tokenizes nothing (callers pass ids), queues the
job for the first free worker process (`worker.py`) and waits. One dispatcher thread reads
the workers' messages and completes each request. Counters, the flush rule and
`internal_states` follow SGLang 0.5.23 (see `Counters`).
"""

from __future__ import annotations

import itertools
import logging
import multiprocessing
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from reference_engine.loading import Options
from reference_engine.params import Sampling
from reference_engine.worker import run_worker

log = logging.getLogger("reference_engine")
HEALTH_CHECK_TIMEOUT_S = 20.0  # SGLang's HEALTH_CHECK_TIMEOUT
READY_TIMEOUT_S = 600.0


class EngineFailure(RuntimeError):
    """A worker failed to load or died; the message says which and why."""


@dataclass
class Counters:
    """Cumulative figures since launch or the last flush (SGLang's internal_states).

    SGLang 0.5.23 feeds `update_spec_metrics(bs, num_correct_drafts, num_accept_tokens=
    num_correct_drafts + bs)` per decode batch, and reports `spec_num_accept_tokens /
    spec_num_forward_ct`: per verify step, the correct drafts + 1, even when a stop string
    or max_new_tokens then cuts the step's tokens; the prefill token is in no step. Unlike
    SGLang, the figure is folded in per finished request, not every `decode_log_interval`
    iterations, so it is never missing after a short run.
    """

    accept_tokens: int = 0
    verify_steps: int = 0

    def add(self, result: dict[str, Any]) -> None:
        accepted = result["accepted_drafts"]
        self.accept_tokens += sum(accepted) + len(accepted)
        self.verify_steps += len(accepted)


@dataclass
class _Job:
    future: Future = field(default_factory=Future)
    on_step: Callable[[list[int]], None] | None = None
    worker: int | None = None


class Engine:
    """Worker processes, their job queue, and the server-wide state."""

    def __init__(self, options: Options, workers: int, server_args: dict[str, Any],
                 dp_size: int = 1) -> None:
        self.options, self.server_args = options, server_args
        # One set of counters per data-parallel rank, as SGLang's schedulers each keep
        # theirs; requests go to the ranks in turn (SGLang 0.5.23's default for a server
        # with no prefill/decode split: round_robin, arg_groups/serving_hook.py
        # handle_load_balance_method).
        self.rank_counters = [Counters() for _ in range(dp_size)]
        self.rank_in_flight = [0] * dp_size  # each scheduler's own running requests
        self.next_rank = itertools.cycle(range(dp_size))
        self.lock = threading.Lock()
        self.last_throughput = 0.0
        self.last_progress = 0.0
        self.worker_info: dict[str, Any] = {}
        context = multiprocessing.get_context("spawn")
        self.jobs = context.Queue()
        self.events = context.Queue()
        self.processes = [
            context.Process(target=run_worker, args=(i, options, self.jobs, self.events),
                            name=f"reference-worker-{i}", daemon=True)
            for i in range(workers)]
        self.pending: dict[int, _Job] = {}
        self.ids = itertools.count()
        self.tokenizer: Any = None  # the server process's copy, set by __main__

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer(text)["input_ids"])

    def decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=True)

    # -- lifecycle ---------------------------------------------------------------------
    def launch_workers(self) -> None:
        """Start the worker processes; they import torch and load the checkpoints while the
        caller does its own loading (`wait_ready` then waits for them)."""
        for process in self.processes:
            process.start()

    def wait_ready(self, timeout_s: float = READY_TIMEOUT_S) -> None:
        """Wait until every worker loaded; raise EngineFailure on any failure."""
        ready: set[int] = set()
        deadline = time.monotonic() + timeout_s
        while len(ready) < len(self.processes):
            kind, index, payload = self._next_event(deadline)
            if kind == "load_error":
                self.stop()
                raise EngineFailure(payload)
            if kind == "ready":
                ready.add(index)
                self.worker_info = payload
        threading.Thread(target=self._dispatch, name="dispatcher", daemon=True).start()
        threading.Thread(target=self._watch, name="worker-watch", daemon=True).start()

    def _next_event(self, deadline: float) -> tuple[str, Any, Any]:
        while True:
            try:
                return self.events.get(timeout=0.5)
            except queue.Empty:
                dead = [p for p in self.processes if p.exitcode is not None]
                if dead:
                    self.stop()
                    raise EngineFailure(f"{dead[0].name} exited with code {dead[0].exitcode} "
                                        "while loading the checkpoints") from None
                if time.monotonic() > deadline:
                    self.stop()
                    raise EngineFailure("the workers did not load the checkpoints in "
                                        f"{READY_TIMEOUT_S:g} s") from None

    def stop(self) -> None:
        for process in self.processes:
            if process.is_alive():
                process.terminate()
        for process in self.processes:
            process.join(timeout=5)
        for channel in (self.jobs, self.events):
            channel.cancel_join_thread()
            channel.close()

    # -- requests ----------------------------------------------------------------------
    def generate(self, prompt_ids: list[int], sampling: Sampling, max_new_tokens: int, *,
                 count: bool = True, on_step: Callable[[list[int]], None] | None = None,
                 ) -> tuple[dict[str, Any], float]:
        """Decode one request; returns (Generation.to_dict(), seconds)."""
        started = time.perf_counter()
        if not any(process.is_alive() for process in self.processes):
            raise EngineFailure(self.dead_message())
        job = _Job(on_step=on_step)
        job_id = next(self.ids)
        with self.lock:
            self.pending[job_id] = job
            rank = next(self.next_rank)
            self.rank_in_flight[rank] += 1
        try:
            self.jobs.put((job_id, prompt_ids, sampling.decoder_kwargs(max_new_tokens),
                           on_step is not None))
            result = job.future.result()
        except BaseException:
            with self.lock:
                self._release(job_id, rank)
            raise
        latency = time.perf_counter() - started
        result = {**result, "dp_rank": rank}
        with self.lock:
            # counted as the request leaves its rank, in one step: a flush sees the rank
            # either busy or with this request's figures in
            self._release(job_id, rank)
            if count:
                self.rank_counters[rank].add(result)
            if latency > 0:
                self.last_throughput = len(result["output_ids"]) / latency
        log.info("generated %d tokens in %d verify steps (%.2f s), finish %s",
                 len(result["output_ids"]), len(result["accepted_drafts"]), latency,
                 result["finish_reason"])
        return result, latency

    def _dispatch(self) -> None:
        while True:
            kind, job_id, payload = self.events.get()
            self.last_progress = time.monotonic()
            with self.lock:
                job = self.pending.get(job_id)
            if job is None:
                continue
            if kind == "start":
                job.worker = payload
            elif kind == "step" and job.on_step is not None and payload is not None:
                try:
                    job.on_step(payload)
                except Exception:  # a streaming client that went away must not stop us
                    log.debug("stream callback failed", exc_info=True)
            elif kind == "done":
                job.future.set_result(payload)
            elif kind == "error":
                job.future.set_exception(EngineFailure(payload))

    def _watch(self) -> None:
        """Fail the request of a worker that died, naming the worker and its exit code."""
        reported: set[int] = set()
        while True:
            time.sleep(1.0)
            for index, process in enumerate(self.processes):
                if process.exitcode is None or index in reported:
                    continue
                reported.add(index)
                log.error("%s exited with code %s", process.name, process.exitcode)
                alive = any(p.is_alive() for p in self.processes)
                with self.lock:  # its request, or every request once no worker is left
                    jobs = [job for job in self.pending.values()
                            if job.worker == index or not alive]
                message = (f"{process.name} exited with code {process.exitcode}" if alive
                           else self.dead_message())
                for job in jobs:
                    if not job.future.done():
                        job.future.set_exception(EngineFailure(message))

    def dead_message(self) -> str:
        codes = ", ".join(f"{p.name} exited with code {p.exitcode}" for p in self.processes)
        return f"no decoding worker is left ({codes})"

    def healthy(self, timeout_s: float = HEALTH_CHECK_TIMEOUT_S) -> bool:
        """SGLang's health check: a 1-token generation, or any progress, within the timeout."""
        tic = time.monotonic()
        if not any(process.is_alive() for process in self.processes):
            return False
        done = threading.Event()

        def probe() -> None:
            try:
                sampling = Sampling(1, 0.0, 1.0, 0, [], None)
                self.generate([0], sampling, 1, count=False)
                done.set()
            except Exception:
                log.warning("health generation failed", exc_info=True)

        threading.Thread(target=probe, daemon=True).start()
        while time.monotonic() < tic + timeout_s:
            if done.wait(0.05) or self.last_progress > tic:
                return True
        return False

    # -- server state ------------------------------------------------------------------
    def _release(self, job_id: int, rank: int) -> None:
        """The request left its rank (the caller holds the lock)."""
        self.rank_in_flight[rank] -= 1
        self.pending.pop(job_id, None)

    def flush(self) -> bool:
        """Reset each DP rank's counters where that rank runs nothing, as each of SGLang's
        schedulers does (`Scheduler.flush_cache`: refused unless `is_fully_idle`); the
        answer is the first rank's alone, as SGLang's (`TokenizerControlMixin.flush_cache`
        returns `results[0]` of the fan-out, 0.5.17 to 0.5.23), so with DP a flush can
        answer 200 while a busy rank keeps its counters."""
        with self.lock:
            idle = [not busy for busy in self.rank_in_flight]
            self.rank_counters = [Counters() if reset else counters for reset, counters
                                  in zip(idle, self.rank_counters, strict=True)]
            return idle[0]

    def server_info(self) -> dict[str, Any]:
        """SGLang's /server_info: `internal_states` holds one state per DP rank."""
        states = []
        with self.lock:
            for counters in self.rank_counters:
                state: dict[str, Any] = {"last_gen_throughput": self.last_throughput}
                if counters.verify_steps:
                    state["avg_spec_accept_length"] = (
                        counters.accept_tokens / counters.verify_steps)
                states.append(state)
        return {**self.server_args, "internal_states": states}
