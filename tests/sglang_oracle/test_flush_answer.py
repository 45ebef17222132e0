"""What SGLang's `/flush_cache` answers when its DP ranks disagree, run from each release's
own `TokenizerControlMixin.flush_cache`: the first rank's result alone. A busy rank (which
keeps its counters, `Scheduler.flush_cache`) is hidden behind a 200 when another answered
first; the harness therefore reads every rank's state after a flush
(`harness.engines.sglang.api.ranks_kept_after_flush`), and the reference engine answers
the same way (tests/reference_engine/test_pure_parts.py)."""

from __future__ import annotations

import ast
import asyncio
from dataclasses import dataclass
from typing import Any

import pytest

from . import extract as x

MIXIN = "sglang/srt/managers/tokenizer_control_mixin.py"


@dataclass
class RankAnswer:  # FlushCacheReqOutput's field the route reads
    success: bool
    message: str = ""


class Manager:
    """What the method reads of its TokenizerManager: the fan-out returns one answer per
    DP rank, in the order they arrived (`managers/communicator.py`)."""

    mm_processor = None

    def __init__(self, answers: list[bool]) -> None:
        self.answers = answers
        self.sent: list[Any] = []

    def auto_create_handle_loop(self) -> None:
        pass

    async def flush_cache_communicator(self, request: Any) -> list[RankAnswer]:
        self.sent.append(request)
        return [RankAnswer(ok) for ok in self.answers]


def flush_route(version: str) -> Any:
    try:
        src = x.source(version, MIXIN)
    except x.OracleUnavailable as missing:
        pytest.skip(str(missing))
    [node] = [n for n in src.cls("TokenizerControlMixin").body
              if isinstance(n, ast.AsyncFunctionDef) and n.name == "flush_cache"]
    namespace: dict[str, Any] = {"FlushCacheReqInput": lambda **fields: fields}
    return x.compile_functions(src, [node], namespace)["flush_cache"]


@pytest.mark.parametrize(("answers", "success"), [
    ([True, False], True),   # rank 1 busy, kept its counters: still a 200
    ([False, True], False),  # the first rank busy: refused, though rank 1 was reset
    ([True, True], True),
    ([False], False),
])
def test_the_route_answers_for_the_first_rank_only(version: str, answers: list[bool],
                                                   success: bool) -> None:
    manager = Manager(answers)
    result = asyncio.run(flush_route(version)(manager))
    assert result.success is success
    assert len(manager.sent) == 1  # one fan-out, no retry of its own
