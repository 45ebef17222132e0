"""The CPU reference engine's launch line (`python -m harness.engines.reference`)."""

from __future__ import annotations

from pathlib import Path

from harness.errors import BadInput
from harness.suite import ReferenceEngine, Suite

RESERVED_FLAGS = frozenset({"--host", "--port", "--target", "--draft"})


def launch_command(
    suite: Suite, python: str, host: str, port: int, target: Path, draft: Path
) -> list[str]:
    engine = suite.engine
    if not isinstance(engine, ReferenceEngine):
        raise BadInput(f"suite {suite.name}: not a reference-engine suite")
    for arg in engine.extra_args:
        if arg.split("=", 1)[0] in RESERVED_FLAGS:
            raise BadInput(f"suite {suite.name}: engine.extra_args may not set {arg}")
    command = [
        python, "-m", "harness.engines.reference",
        "--target", str(target),
        "--draft", str(draft),
        "--host", host,
        "--port", str(port),
        "--attention-policy", engine.attention_policy,
        "--draft-noise", f"{engine.draft_noise:g}",
        "--seed", str(suite.workload.seed),
    ]
    if suite.speculative.draft_tokens is not None:
        command += ["--block-size", str(suite.speculative.draft_tokens)]
    return command + list(engine.extra_args)
