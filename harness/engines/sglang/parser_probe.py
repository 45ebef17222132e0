"""Run by the engine environment's interpreter (not the harness's): SGLang's own reading of
launch lines, `python parser_probe.py < lines.json` (a JSON list of argument lists, the
lines after `-m sglang.launch_server`), a JSON list of answers on stdout, one per line.

`prepare_server_args(argv)` is what `python -m sglang.launch_server` runs first (argparse
from `ServerArgs.add_cli_args`, then `ServerArgs.from_cli_args`); `resolve_once()` is the
resolution pipeline the launch runs next (`arg_groups/pipeline.py`: the parallel,
speculative, disaggregation and platform hooks), where a release refuses a topology it
cannot serve (`parallel_hook.handle_data_parallelism`, `speculative_hook._handle_ngram`:
"ngram speculative decoding does not support dp attention", ...). The answer names the
release's own message and where it was raised, so the harness can refuse the suite with
it before any server starts. Imports nothing of the harness: the engine environment
does not have it.
"""

from __future__ import annotations

import json
import linecache
import sys
import traceback

# The resolved fields the harness compares with the suite's topology (names as 0.5.23's
# ServerArgs has them; an older release may lack some: absent ones are left out).
REPORTED = ("tp_size", "dp_size", "attn_dp_size", "enable_dp_attention", "pp_size", "nnodes",
            "node_rank", "dist_init_addr", "disaggregation_mode",
            "disaggregation_transfer_backend", "speculative_algorithm", "device")


def where(error: BaseException) -> dict[str, object]:
    """The innermost frame inside sglang that raised `error`: file (from `sglang/`), line,
    function, and the source line (an `assert` without a message says only that)."""
    frames = traceback.extract_tb(error.__traceback__)
    inside = [frame for frame in frames if "/sglang/" in frame.filename] or frames
    frame = inside[-1]
    # from the package's own folder on: site-packages/ or a patched copy's python/
    marker = frame.filename.rfind("/sglang/")
    filename = frame.filename[marker + 1:] if marker >= 0 else frame.filename
    code = (frame.line or linecache.getline(frame.filename, frame.lineno or 0)).strip()
    return {"file": filename, "line": frame.lineno, "function": frame.name, "code": code}


def main(argv: list[str]) -> dict[str, object]:
    try:
        from sglang.srt.server_args import prepare_server_args
    except Exception as error:
        return {"error": f"sglang does not import: {type(error).__name__}: {error}"}
    stage = "parse"
    try:
        args = prepare_server_args(argv)
        stage = "resolve"
        resolve = getattr(args, "resolve_once", None)
        if resolve is not None:  # releases before resolve_once check in __post_init__
            resolve()
    except SystemExit as error:  # argparse's way of refusing: its message went to stderr
        return {"refused": f"the argument parser exited with {error.code}", "stage": stage}
    except BaseException as error:
        message = str(error).strip() or "(no message)"
        return {"refused": f"{type(error).__name__}: {message}", "stage": stage,
                "where": where(error)}
    return {"ok": True, "resolved": {key: getattr(args, key) for key in REPORTED
                                     if hasattr(args, key)}}


if __name__ == "__main__":
    answers = [main([str(arg) for arg in argv]) for argv in json.load(sys.stdin)]
    sys.stdout.write("\n" + json.dumps(answers, default=str) + "\n")
