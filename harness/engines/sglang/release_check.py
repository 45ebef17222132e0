"""A suite's topology as the SGLang release under test reads it, before any server starts.

The launch lines of a topology (every node, every side of a prefill/decode split) go to
`parser_probe.py`, run by the build's own interpreter: SGLang's `prepare_server_args` and
`resolve_once`, the steps `python -m sglang.launch_server` takes before it starts a
process. A refusal is bad input (exit 2) naming the release's own message and the line of
its code that raised it; the resolved sizes must be the suite's (a release that quietly
reads a flag otherwise is refused too). Only a multi-rank topology is checked: a
one-process suite's line is what every run has always launched, and the check costs an
import of SGLang (seconds; minutes on a loaded machine).
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from harness.errors import BadInput, EngineError

PROBE = Path(__file__).with_name("parser_probe.py")
PROBE_TIMEOUT_S = 600.0


def probe(python: str, lines: Sequence[Sequence[str]], env: Mapping[str, str],
          timeout_s: float = PROBE_TIMEOUT_S) -> list[dict[str, object]]:
    """SGLang's answer for each line (the arguments after `-m sglang.launch_server`)."""
    try:
        done = subprocess.run([python, str(PROBE)], input=json.dumps([list(a) for a in lines]),
                              capture_output=True, text=True, timeout=timeout_s,
                              env={**os.environ, **env}, check=False)
    except subprocess.TimeoutExpired:
        raise EngineError(f"SGLang's parser did not answer in {timeout_s:g} s") from None
    except OSError as error:
        raise EngineError(f"cannot run {python}: {error}") from None
    last = done.stdout.strip().splitlines()[-1:] or [""]
    try:
        answers = json.loads(last[0])
    except ValueError:
        tail = "\n".join(done.stderr.strip().splitlines()[-15:])
        raise EngineError(f"SGLang's parser probe failed (exit {done.returncode}):\n{tail}"
                          ) from None
    if not isinstance(answers, list) or len(answers) != len(lines):
        raise EngineError(f"SGLang's parser probe answered {last[0][:200]!r}")
    return answers


def refusal_text(answer: Mapping[str, object]) -> str:
    """`ValueError: ... (raised at sglang/srt/...py:326 in handle_data_parallelism: assert
    ...)`: the release's message and where its code raised it."""
    text = str(answer.get("refused"))
    where = answer.get("where")
    if isinstance(where, Mapping):
        text += (f" (raised at {where.get('file')}:{where.get('line')} in "
                 f"{where.get('function')}: `{where.get('code')}`)")
    return text


def check(suite_name: str, version: str | None, topology_text: str,
          lines: Mapping[str, Sequence[str]], answers: Sequence[Mapping[str, object]],
          expected: Mapping[str, Mapping[str, object]]) -> None:
    """BadInput for the first line the release refuses, or reads other than the suite
    means (`expected`: line name -> resolved field -> value)."""
    release = f"SGLang {version}" if version else "this SGLang build"
    for (name, _argv), answer in zip(lines.items(), answers, strict=True):
        if "error" in answer:
            raise EngineError(f"{release}: {answer['error']}")
        if "refused" in answer:
            raise BadInput(f"suite {suite_name}: {release} refuses the topology "
                           f"({topology_text}) for its {name} line: {refusal_text(answer)}")
        reported = answer.get("resolved")
        resolved = dict(reported) if isinstance(reported, Mapping) else {}
        if isinstance(resolved.get("dp_size"), int):  # 0.5.23: DP attention is attn_dp_size
            resolved["dp_ranks"] = resolved["dp_size"] * int(resolved.get("attn_dp_size") or 1)
        for key, value in expected.get(name, {}).items():
            if key in resolved and resolved[key] != value:
                raise BadInput(f"suite {suite_name}: {release} resolves the {name} line's "
                               f"{key} to {resolved[key]!r}, the suite means {value!r}")
