"""The SGLang launch line, with the flags SGLang 0.5.23 defines.

Flag names are `--` + the field names in `sglang/srt/arg_groups/fields/*.py`
(`model.py`, `spec.py`, `parallel.py`, `serving.py`, `device.py`); DFLASH
checks live in `sglang/srt/arg_groups/speculative_hook.py` (`_handle_dflash`).
"""

from __future__ import annotations

from collections.abc import Sequence

from harness.errors import BadInput
from harness.suite import SGLangEngine, Suite

# Flags the harness owns; a suite's extra_args may not override them.
RESERVED_FLAGS = frozenset({
    "--host", "--port", "--model-path", "--model", "--tp-size", "--tensor-parallel-size", "--tp",
    "--speculative-algorithm", "--speculative-draft-model-path", "--speculative-draft-model",
    "--speculative-num-draft-tokens", "--speculative-dflash-block-size",
})


def launch_command(suite: Suite, python: str, host: str, port: int) -> list[str]:
    engine = suite.engine
    if not isinstance(engine, SGLangEngine) or suite.target is None or suite.draft is None:
        raise BadInput(f"suite {suite.name}: not an sglang suite")
    _check_extra_args(suite.name, engine.extra_args)
    spec = suite.speculative
    command = [python, "-m", "sglang.launch_server", "--model-path", suite.target.model]
    if suite.target.revision:
        command += ["--revision", suite.target.revision]
    command += [
        "--speculative-algorithm", spec.algorithm,
        "--speculative-draft-model-path", suite.draft.model,
    ]
    if suite.draft.revision:
        command += ["--speculative-draft-model-revision", suite.draft.revision]
    # DFLASH aliases: pass the one the suite names (SGLang rejects them if they differ).
    if spec.num_draft_tokens is not None:
        command += ["--speculative-num-draft-tokens", str(spec.num_draft_tokens)]
    elif spec.block_size is not None:
        command += ["--speculative-dflash-block-size", str(spec.block_size)]
    if spec.num_steps is not None:
        command += ["--speculative-num-steps", str(spec.num_steps)]
    if spec.eagle_topk is not None:
        command += ["--speculative-eagle-topk", str(spec.eagle_topk)]
    if spec.draft_attention_backend:
        command += ["--speculative-draft-attention-backend", spec.draft_attention_backend]
    command += [
        "--tp-size", str(suite.topology.tp_size),
        "--random-seed", str(suite.workload.seed),
        "--host", host,
        "--port", str(port),
    ]
    return command + list(engine.extra_args)


def _check_extra_args(name: str, extra: Sequence[str]) -> None:
    for arg in extra:
        flag = arg.split("=", 1)[0]
        if flag in RESERVED_FLAGS:
            raise BadInput(
                f"suite {name}: engine.extra_args may not set {flag}; the harness sets it "
                "(host is always 127.0.0.1, the port is chosen free, TP comes from topology)"
            )
