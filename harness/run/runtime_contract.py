"""Runtime meets audit for every clause beyond attention: what reached the draft at run time.

The audit (harness/run/draft_attention.py, before the launch) says how the build's own
code resolves each clause of the draft's contract: taps, block size, mask token and id,
draft layers, fc input width, embeddings, lm_head. On CPU the stand-ins
(`tests/cpu_stand_ins/contract_record.py`) read SGLang's own objects once its DFLASH worker
is built, and the width of the target hidden states that reach the draft, and append one
JSON line per clause to the file `RECORD_ENV` names. After the measurement the harness
reads them into run.json (`draft_contract_runtime`) and compares: a clause whose recorded
value differs from the audit's, or a resolved clause the engine recorded nothing for, is
an error naming the clause, judged before accept length (the build measured is not the
build audited). Per-layer attention has its own record (runtime_attention.py).
vLLM's CPU DFlash writes the same lines from vLLM's own objects (harness/engines/vllm/
recorder/vllm_record.py), compared with the audit's vLLM column for the vLLM launched.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from harness.errors import EngineError
from harness.results.checks import BadFile, read_regular
from harness.results.record import ClauseRow
from harness.suite.draft_contract import Clause, clause_differences

if TYPE_CHECKING:
    from harness.suite.model import Suite

RECORD_ENV = "HARNESS_CONTRACT_RECORD"  # the stand-in reads the same name
RECORD_FILE = "contract-runtime.jsonl"  # in the (first) run's folder, beside server.log


def read_runtime(path: Path) -> dict[str, list[tuple[int | str | list[int], str]]]:
    """clause -> the distinct (value, where recorded) lines, in the order written. A line
    that is not the stand-in's JSON is an error naming the file and line."""
    try:
        data, _ = read_regular(path)
    except FileNotFoundError:
        return {}
    except (BadFile, OSError) as error:
        raise EngineError(f"{path}: not a readable contract record ({error})") from None
    found: dict[str, list[tuple[int | str | list[int], str]]] = {}
    for number, line in enumerate(data.decode("utf-8", errors="replace").split("\n"), 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
            clause, value, where = str(item["clause"]), item["value"], str(item["where"])
            if isinstance(value, list):
                value = [int(v) for v in value]
            elif not isinstance(value, int | str) or isinstance(value, bool):
                raise TypeError(f"value {value!r}")
        except (ValueError, KeyError, TypeError) as error:
            raise EngineError(f"{path}:{number}: not a contract record line ({error})") \
                from None
        entry = (value, where)
        if entry not in found.setdefault(clause, []):
            found[clause].append(entry)
    return found


def rows(runtime: Mapping[str, list[tuple[int | str | list[int], str]]]
         ) -> dict[str, ClauseRow]:
    """The runtime record as run.json keeps it: a clause's first value, where it came from
    and, when it was recorded more than once, every value in the note."""
    kept = {}
    for clause, seen in runtime.items():
        value, where = seen[0]
        note = None if len(seen) == 1 else "; ".join(f"{v} ({w})" for v, w in seen)
        kept[clause] = ClauseRow(value=value, source=where, note=note)
    return kept


def _shown(value: object) -> str:
    if isinstance(value, list | tuple):
        return "[" + ",".join(str(v) for v in value) + "]"
    return str(value)


def differences(audit: Mapping[str, ClauseRow],
                runtime: Mapping[str, list[tuple[int | str | list[int], str]]],
                unrecorded: bool = True) -> list[str]:
    """Each clause whose recorded value differs from the audit's, by name. A clause the
    audit leaves to the engine (vLLM's embeddings and lm_head, decided from the weights at
    load) is compared with itself: a value the forward used other than the one the engine
    recorded first (at load) is named. Clauses the audit could not resolve otherwise are
    not compared (the preflight already said so). `unrecorded` False: a clause the engine
    recorded nothing for is not named (a run the engine ended before it recorded it)."""
    found: list[str] = []
    for clause, row in audit.items():
        if row.value is None and row.error is None and row.limit is None:
            loaded = runtime.get(clause) or []
            found.extend(
                f"{clause}: reached the model as {_shown(value)} ({where}); the engine "
                f"chose {_shown(loaded[0][0])} at load ({loaded[0][1]})"
                for value, where in loaded[1:] if value != loaded[0][0])
            continue
        if row.value is None or row.error is not None or row.limit is not None:
            continue
        want = list(row.value) if isinstance(row.value, list | tuple) else row.value
        seen = runtime.get(clause)
        if not seen:
            if not unrecorded:
                continue
            found.append(f"{clause}: the engine recorded nothing for it at run time (the "
                         f"audit says {_shown(want)})")
            continue
        for value, where in seen:
            if value != want:
                found.append(f"{clause}: reached the model as {_shown(value)} ({where}); "
                             f"the audit says {_shown(want)}"
                             + (f" ({row.source})" if row.source else ""))
    return found


def check(record_file: Path, audit: Mapping[str, ClauseRow] | None
          ) -> tuple[dict[str, ClauseRow], list[str]]:
    """(the runtime clauses as run.json keeps them, their differences from the audit's).
    An engine that recorded nothing, or no audit to compare with, is itself a
    difference."""
    runtime = read_runtime(record_file)
    if not runtime:
        return {}, [f"the engine recorded none of the draft's clauses at run time "
                    f"({record_file})"]
    if not audit:
        return rows(runtime), ["no audit of this build's clauses to compare the run's with"]
    return rows(runtime), differences(audit, runtime)


def expected_differences(suite: Suite, audit: Mapping[str, ClauseRow] | None,
                         runtime: Mapping[str, ClauseRow] | None) -> list[str]:
    """The recorded clauses against the suite's expected_contract ("declared": the values
    the audit read from the checkpoint), each line naming the clause, "at run time"."""
    expected = suite.draft.expected_contract if suite.draft else None
    if expected is None or not runtime:
        return []
    if isinstance(expected, str):  # "declared": the preflight compared those already
        return []
    recorded = {name: Clause(tuple(row.value) if isinstance(row.value, list) else row.value,
                             row.source) for name, row in runtime.items()}
    wanted = {name: value for name, value in expected.items() if name in recorded}
    return clause_differences(wanted, recorded, "the engine at run time")
