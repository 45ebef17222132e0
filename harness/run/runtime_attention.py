"""Runtime meets audit: the attention each draft layer's kernel actually received.

The audit (`harness.audit`, run before the launch) says how the build's own code resolves
each draft layer's attention; it reads the code, not the running server. Where the
engine's attention kernel can say what it was called with, the run records that too and
the two must agree: a difference is an error naming the layer. On CPU the kernel is the
test stand-in (`tests/cpu_stand_ins/sgl_kernel/attention.py`): with `RECORD_ENV` naming a
file, it appends one JSON line per distinct (model, layer, kernel, causal, window) it was
called with, the layer taken from the attention backend's `layer` argument in its
caller's frame and the model from the model file on the stack (`dflash`: the draft).

A suite gets the check when its server runs kernel stand-ins (`engine.stand_ins`) and its
algorithm has a DFlash draft whose attention the audit resolves (DFLASH). vLLM's CPU
DFLASH records the same lines from its own CPU attention backend (the recorder in
harness/engines/vllm/recorder, put first on the server's PYTHONPATH: `recorder_path`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from harness.engines.vllm.recorder import FOLDER
from harness.errors import EngineError
from harness.results.checks import BadFile, read_regular
from harness.results.record import LayerRow, RuntimeLayerRow

if TYPE_CHECKING:
    from harness.suite.model import Suite

RECORD_ENV = "HARNESS_ATTENTION_RECORD"  # the stand-in reads the same name
RECORD_FILE = "attention-runtime.jsonl"  # in the (first) run's folder, beside server.log
DRAFT_MODEL = "dflash"  # sglang/srt/models/dflash.py: the DFlash draft's model code


def wanted(suite: Suite) -> bool:
    """Whether this suite's server records its draft's kernel calls (and, with them, what
    reached the draft of every other clause: runtime_contract.py): SGLang DFLASH with
    kernel stand-ins, and vLLM's DFLASH on CPU, whose recorder
    (harness/engines/vllm/recorder) reads vLLM's own objects and its CPU attention
    backend's calls."""
    engine = suite.engine
    if suite.speculative.algorithm != "DFLASH":
        return False
    kind = getattr(engine, "kind", None)
    if kind == "vllm":
        return suite.topology.gpus == 0  # the CPU backend is the one the recorder reads
    return kind == "sglang" and bool(getattr(engine, "stand_ins", []))


def recorder_path(suite: Suite, env: dict[str, str]) -> str | None:
    """The server's PYTHONPATH with the vLLM recorder's folder first (its sitecustomize
    chains to any other), for a vLLM suite; None for others (SGLang's stand-ins record)."""
    if getattr(suite.engine, "kind", None) != "vllm":
        return None
    rest = env.get("PYTHONPATH") or os.environ.get("PYTHONPATH")
    return ":".join([str(FOLDER), *filter(None, [rest])])


def read_runtime(path: Path) -> list[RuntimeLayerRow]:
    """The draft layers' rows of the kernel's record, distinct and in layer order. A line
    that is not the stand-in's JSON is an error naming the file and line."""
    try:  # the results' door: a regular file of bounded size, read without blocking
        data, _ = read_regular(path)
    except FileNotFoundError:
        return []
    except (BadFile, OSError) as error:
        raise EngineError(f"{path}: not a readable kernel record ({error})") from None
    rows: set[tuple[int, str, bool, int | None]] = set()
    text = data.decode("utf-8", errors="replace")  # lines are "\n"-separated, as written
    for number, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
            if item["model"] != DRAFT_MODEL:
                continue
            window = item["window"]
            row = (int(item["layer"]), str(item["kernel"]), bool(item["causal"]),
                   None if window is None else int(window))
        except (ValueError, KeyError, TypeError) as error:
            raise EngineError(f"{path}:{number}: not a kernel record line ({error})") from None
        rows.add(row)
    return [RuntimeLayerRow(index=i, kernel=k, causal=c, window=w)
            for i, k, c, w in sorted(rows, key=lambda r: (r[0], r[1], r[2], r[3] or 0))]


def _shown(causal: bool, window: int | None) -> str:
    kind = "causal" if causal else "bidirectional"
    return f"{kind}, window {window}" if window is not None else f"{kind}, no window"


def differences(audit: Sequence[LayerRow], runtime: Sequence[RuntimeLayerRow],
                uncalled: bool = True) -> list[str]:
    """Each draft layer whose kernel calls differ from the audit's table, by name. The
    prefill/verify kernel (`extend`) must match causality and window; a decode call is
    causal by definition and must match the window. `uncalled` False: a layer with no
    recorded call is not named (a run the engine ended before it reached that layer)."""
    found = []
    expected = {layer.index: layer for layer in audit}
    called = {row.index for row in runtime}
    for index in sorted(expected):
        layer = expected[index]
        if index not in called:
            if not uncalled:
                continue
            found.append(f"draft layer {index}: the attention kernel recorded no call (the "
                         f"audit says {_shown(layer.causal, layer.window)})")
            continue
        for row in (r for r in runtime if r.index == index):
            same = (row.window == layer.window and
                    (row.kernel != "extend" or row.causal == layer.causal))
            if not same:
                found.append(f"draft layer {index}: the {row.kernel} kernel received "
                             f"{_shown(row.causal, row.window)}; the audit says "
                             f"{_shown(layer.causal, layer.window)}")
    for index in sorted(called - set(expected)):
        found.append(f"draft layer {index}: the attention kernel was called for it, but the "
                     "audit's table has no such layer")
    return found


def check(record_file: Path, audit: Sequence[LayerRow] | None
          ) -> tuple[list[RuntimeLayerRow], list[str]]:
    """(the runtime table, its differences from the audit). No audit table to compare
    with, or a kernel that recorded nothing for the draft, is itself a difference."""
    runtime = read_runtime(record_file)
    if not runtime:
        return runtime, [f"the attention kernel recorded no call of the draft's layers "
                         f"({record_file})"]
    if not audit:
        return runtime, ["no audit table for this build to compare the kernel's calls with"]
    return runtime, differences(audit, runtime)


def expected_differences(suite: Suite, runtime: Sequence[RuntimeLayerRow] | None) -> list[str]:
    """What the kernel received against the suite's expected_layers, layer by layer."""
    expected = suite.draft.expected_layers if suite.draft else None
    if not expected or not runtime:
        return []
    wanted = [LayerRow(index=index, window=layer.window, causal=layer.causal)
              for index, layer in enumerate(expected)]
    return [line.replace("the audit says", "the suite expects") + " (at run time)"
            for line in differences(wanted, runtime)]
