"""The CPU reference engine's adapter: its own launch line, SGLang 0.5.23's API.

The engine (`python -m reference_engine`) serves the subset of SGLang's API
the harness uses, with SGLang's response shapes, so everything after the launch line is
the SGLang adapter's (`harness.engines.sglang.api`); it also reports the draft's
per-layer attention as it applied it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from harness.engine_kinds import ENGINES
from harness.engines.flags import check_suite_flags, without_flags
from harness.engines.interface import Placement
from harness.engines.sglang import SGLangAdapter, api
from harness.errors import BadInput
from harness.suite.checkpoints import Models
from harness.suite.model import Suite
from harness.suite.serving import ReferenceEngine

LAUNCH_MODULE = "reference_engine"
RESERVED_FLAGS = frozenset({"--host", "--port", "--target", "--draft", "--attention-policy",
                            "--draft-noise", "--seed", "--block-size", "--dp-size",
                            "--no-speculation", "--device"})
SECRET_FLAGS = ENGINES["reference"].secret_flags  # harness/engine_kinds.py
RESERVED_WHY = ("set the suite's engine.attention_policy, engine.draft_noise, "
                "workload.seed, speculative.block_size, topology.dp_size or topology.gpus "
                "instead")
# A rehearsal's override of the device a GPU suite's engine runs on (`cpu`), so that a host
# without CUDA walks the whole GPU path (gpus = 1, the allocator, the GPU provenance) with
# the models on the CPU (ci/gpu/rehearse.sh). The launch line and the record's
# provenance.device say what ran; never set on a real GPU run.
DEVICE_ENV = "HARNESS_REFERENCE_DEVICE"


def engine_device(suite: Suite) -> str:
    """Where the reference engine's models run: `cuda` for a topology with GPUs (one), `cpu`
    for `gpus = 0`; `$HARNESS_REFERENCE_DEVICE` (cpu or cuda) overrides it."""
    override = os.environ.get(DEVICE_ENV, "").strip()
    if override:
        if override not in ("cpu", "cuda"):
            raise BadInput(f"{DEVICE_ENV}={override!r}: expected cpu or cuda")
        return override
    return "cuda" if suite.topology.gpus > 0 else "cpu"


def check_flags(suite: Suite) -> None:
    check_suite_flags(suite.name, suite.engine.extra_args, RESERVED_FLAGS, SECRET_FLAGS,
                      RESERVED_WHY)


def launch_command(suite: Suite, python: str, host: str, port: int,
                   target: Path, draft: Path) -> list[str]:
    engine = suite.engine
    if not isinstance(engine, ReferenceEngine):
        raise BadInput(f"suite {suite.name}: not a reference-engine suite")
    check_flags(suite)
    check_topology(suite)
    command = [
        python, "-m", LAUNCH_MODULE,
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
    if suite.topology.dp_size > 1:
        command += ["--dp-size", str(suite.topology.dp_size)]
    device = engine_device(suite)
    if device != "cpu" or suite.topology.gpus > 0:  # a CPU suite's line is as it was;
        command += ["--device", device]  # a GPU suite's says where it runs, overridden too
    return command + list(engine.extra_args)


def check_topology(suite: Suite) -> None:
    """The reference engine is one process on one CPU or one GPU: of a topology it runs only
    data parallelism (ranks with their own counters, as SGLang's); the rest is refused."""
    topology = suite.topology
    if topology.gpus > 1:
        raise BadInput(f"suite {suite.name}: the reference engine runs on one GPU at most "
                       f"(topology.gpus = {topology.gpus}); set gpus = 1 (CUDA) or 0 (CPU)")
    unsupported = [name for name, value, default in (
        ("tp_size", topology.tp_size, 1), ("pp_size", topology.pp_size, 1),
        ("nnodes", topology.nnodes, 1), ("dp_attention", topology.dp_attention, False),
        ("disaggregation", topology.disaggregation, None)) if value != default]
    if unsupported:
        raise BadInput(f"suite {suite.name}: the reference engine runs no "
                       f"{', '.join('topology.' + name for name in unsupported)} (one process "
                       "on CPU or one GPU; of a topology it serves dp_size only)")


class ReferenceAdapter(SGLangAdapter):
    """SGLang's API (routes, bodies, parsing, auth) with the reference engine's launch line,
    its own settings check and the attention table it reports."""

    kind = "reference"
    reserved_flags = RESERVED_FLAGS
    secret_flags = SECRET_FLAGS

    def check_flags(self, suite: Suite) -> None:
        check_flags(suite)
        check_topology(suite)

    def launch_command(self, suite: Suite, python: str, host: str, port: int,
                       models: Models | None = None,
                       checkpoints: tuple[Path, Path] | None = None,
                       placement: Placement | None = None) -> list[str]:
        if checkpoints is None:
            raise BadInput(f"suite {suite.name}: the reference engine needs checkpoint folders")
        return launch_command(suite, python, host, port, *checkpoints)

    def target_alone_command(self, command: Sequence[str]) -> list[str]:
        """The launch line `command` serving the target alone ([speedup]): no block size,
        `--no-speculation` (one target token a step, no draft), the rest as it was."""
        return [*without_flags(command, ("--block-size",)), "--no-speculation"]

    def settings_mismatches(self, info: object, suite: Suite,
                            models: Models | None = None) -> list[str]:
        expected: dict[str, object] = {
            "speculative_algorithm": suite.speculative.algorithm,
            "speculative_num_draft_tokens": suite.speculative.draft_tokens,
        }
        if models is not None:
            expected["speculative_draft_model_path"] = models.draft
        # the device the suite asked for is the one the server reports: never a fall-back
        expected["device"] = engine_device(suite)
        return api.settings_mismatches(info, expected, None)

    def check_release(self, suite: Suite, python: str, lines: Mapping[str, Sequence[str]],
                      env: Mapping[str, str],
                      version: str | None) -> None:
        """The reference engine's topology is checked with the suite (`check_topology`):
        there is no SGLang release to ask."""

    def attention_from_server(self, info: object) -> list[dict[str, object]] | None:
        layers = info.get("attention_layers") if isinstance(info, Mapping) else None
        return layers if isinstance(layers, list) else None


ADAPTER = ReferenceAdapter()
