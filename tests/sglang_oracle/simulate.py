"""Synthetic requests through SGLang's own bookkeeping: what a GPU would do is all that is ours.

A `Plan` is what the GPU would decide for one request: the target's greedy continuation
(words, one token each) and how many drafts the target accepts at each verify step. The
`Scheduler` batches requests like SGLang's scheduler does where it matters for the counts:
at most `max_running` requests decode together (DFLASH's default is 48,
`arg_groups/speculative_hook.py` `_handle_dflash`), the token sampled at prefill is in no
verify step, and with the overlap scheduler (SGLang's default on GPU) a request whose last
step finished it by a stop string or EOS is verified once more in the batch that was already
launched (scheduler.py `event_loop_overlap`; 0.5.23 leaves out the requests that finish by
length, `_reqs_finishing_inflight`). Every count, stop position and figure then comes from
the release's own functions (`sglang_code.SGLang`).
"""

from __future__ import annotations

import hashlib
import random
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .sglang_code import SGLang, WordTokenizer

ANSWER = "Let me think step by step. {n} plus {n} is {m}. The answer is {m}."
FILLER = ("First", "we", "read", "the", "question", "and", "add", "each", "number", "carefully.")
STOP_WORD = "Question:"  # what the model writes next: SGLang's GSM8K stop strings match it


@dataclass
class Plan:
    """One request as the GPU would play it."""

    rid: str
    words: list[str]  # the target's greedy continuation, one token per word
    correct: list[int]  # correct drafts at each verify step (capped at block size - 1)
    max_new_tokens: int
    stop: tuple[str, ...] = ()
    answer: str = ""


def plan_for(rid: str, prompt: str, max_new_tokens: int, stop: Sequence[str], accept: float,
             block: int) -> Plan:
    """Deterministic per prompt: the same prompt gives the same continuation and acceptance."""
    digest = int(hashlib.sha256(prompt.encode()).hexdigest()[:12], 16)
    rng = random.Random(digest)
    n = digest % 50 + 1
    answer = ANSWER.format(n=n, m=2 * n).split()
    length = 24 + digest % 40  # tokens before the stop word
    reasoning = [FILLER[i % len(FILLER)] for i in range(max(0, length - len(answer)))]
    tail = [FILLER[i % len(FILLER)] for i in range(max_new_tokens + block + 2)]
    words = [*reasoning, *answer, STOP_WORD, WordTokenizer.EOS, *tail]
    mean = min(max(1.0, rng.gauss(accept, 0.6)), float(block))
    correct = [min(max(0, round(rng.gauss(mean - 1, 1.0))), block - 1)
               for _ in range(max_new_tokens + 2)]
    return Plan(rid, words, correct, max_new_tokens, tuple(stop), " ".join(answer))


@dataclass
class Running:
    """A request inside the scheduler."""

    plan: Plan
    req: Any  # SGLang's Req methods on stand-in state
    ids: list[int]
    rows: int = 0  # verify rows it took part in, overshoot included
    overshoot: bool = False
    result: dict[str, Any] = field(default_factory=dict)


class Scheduler:
    """Prefill, then decode batches of every running request, one verify step each."""

    def __init__(self, sglang: SGLang, tokenizer: WordTokenizer | None = None,
                 overlap: bool = True, max_running: int = 48) -> None:
        self.sglang = sglang
        self.tokenizer = tokenizer or WordTokenizer()
        self.overlap = overlap
        self.max_running = max_running
        self.waiting: deque[Running] = deque()
        self.running: list[Running] = []
        self.decode_iterations = 0

    def add(self, plan: Plan, prompt_ids: Sequence[int] = ()) -> Running:
        ids = [self.tokenizer.add(word) for word in plan.words]
        req = self.sglang.new_request(plan.rid, prompt_ids, self.tokenizer, plan.max_new_tokens,
                                      plan.stop)
        item = Running(plan, req, ids)
        self.waiting.append(item)
        return item

    @property
    def idle(self) -> bool:
        return not self.waiting and not self.running

    def iterate(self) -> list[Running]:
        """One scheduler round: admit and prefill, then one decode batch. Returns finished."""
        done = self._admit()
        batch = list(self.running)
        if batch:
            done += self._decode(batch)
        return done

    def _admit(self) -> list[Running]:
        done = []
        active = sum(1 for item in self.running if not item.overshoot)
        while self.waiting and active < self.max_running:
            item = self.waiting.popleft()
            self.sglang.prefill(item.req, item.ids[0])
            if item.req.finished():
                done.append(self._finish(item))
            else:
                self.running.append(item)
                active += 1
        return done

    def _decode(self, batch: list[Running]) -> list[Running]:
        block = self.sglang.num_draft_tokens
        leaves_by_length = {id(item): self.sglang.finishes_by_length_in_flight(item.req)
                            for item in batch}
        runs = []
        for item in batch:
            correct = min(item.plan.correct[min(item.rows, len(item.plan.correct) - 1)],
                          block - 1)
            start = len(item.req.output_ids)
            runs.append(item.ids[start:start + correct + self.sglang.non_draft])
            item.rows += 1
        self.sglang.decode_batch([item.req for item in batch], runs)
        self.decode_iterations += 1
        done, keep = [], []
        for item in batch:
            if item.overshoot:
                continue  # its one overshoot row is spent
            if not item.req.finished():
                keep.append(item)
                continue
            done.append(self._finish(item))
            if self.overlap and not leaves_by_length[id(item)]:
                item.overshoot = True  # the next batch was launched before this result
                keep.append(item)
        self.running = keep
        return done

    def _finish(self, item: Running) -> Running:
        req = item.req
        meta = self.sglang.meta_info([req])[0]
        item.result = {
            "completion_tokens": len(req.output_ids_through_stop),
            "finish_reason": self.sglang.finish_reason(req),
            "text": self.text(item),
            **meta,
        }
        return item

    def text(self, item: Running) -> str:
        """The detokenized output: stop string trimmed, EOS skipped (DetokenizerManager)."""
        text = self.tokenizer.decode(item.req.output_ids_through_stop, skip_special_tokens=True)
        reason = item.req.finished_reason.to_json() if item.req.finished_reason else {}
        matched = reason.get("matched")
        if isinstance(matched, str) and matched in text:
            text = text[:text.index(matched)]
        return text.rstrip()

    def run(self, plans: Sequence[Plan]) -> list[Running]:
        """All plans to completion, in order of arrival; returns them in plan order."""
        items = [self.add(plan) for plan in plans]
        while not self.idle:
            self.iterate()
        return items
