"""What a run may write besides its figures: the suite document and launch line as
harness.secrets redacts them, the run's provenance, and its plot."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path

from harness import builds
from harness.engines.reference_adapter import engine_device
from harness.engines.registry import secret_flags
from harness.errors import error_text
from harness.results.record import GPUInfo, Provenance
from harness.run import provenance as collect
from harness.run.plan import PreparedEngine, server_env, stand_in_folders
from harness.run.preflight import Fit
from harness.secrets import redact_argv, redact_document
from harness.suite.model import LoadedSuite, Suite, VLLMEngine
from harness.suite.serving import ReferenceEngine, SGLangEngine
from harness.workloads import WorkloadPlan
from reference_engine.checkpoints import draft_files_sha256, served_weights_sha256


def redact_command(command: Sequence[str], suite: Suite) -> list[str]:
    """The launch line as recorded and printed: read with the suite's engine's flags."""
    return redact_argv(command, secret_flags(suite.engine.kind))


def redacted_document(loaded: LoadedSuite) -> dict[str, object]:
    """The suite document as recorded: secret env values and flag values replaced."""
    return redact_document(json.loads(json.dumps(loaded.document)),
                           secret_flags(loaded.suite.engine.kind))


def provenance(loaded: LoadedSuite, engine: PreparedEngine | None, gpus: Sequence[GPUInfo],
               fit: Fit | None, data: WorkloadPlan | None) -> Provenance:
    used = [g for g in gpus if fit is not None and g.index in fit.devices]
    weights = None
    if engine is not None and engine.checkpoints is not None:
        weights = served_weights_sha256(*engine.checkpoints)
    elif engine is not None and isinstance(engine.suite.engine, VLLMEngine) and \
            engine.models is not None and engine.models.draft is not None and \
            (Path(engine.models.draft) / "model.safetensors").is_file() and \
            (Path(engine.models.target) / "model.safetensors").is_file():
        # local folders (vLLM's tiny suite): the weights and the draft config it serves
        weights = {"target": builds.file_sha256(Path(engine.models.target) / "model.safetensors"),
                   **draft_files_sha256(Path(engine.models.draft))}
    stand_ins = None
    if isinstance(loaded.suite.engine, SGLangEngine) and loaded.suite.engine.stand_ins:
        stand_ins = {str(f): builds.folder_sha256(f) for f in stand_in_folders(loaded.suite)}
    patches = None  # the ones the build applied (for its release)
    if isinstance(loaded.suite.engine, SGLangEngine) and loaded.suite.engine.test_patches \
            and engine is not None:
        patches = {p["path"]: p["sha256"] for p in getattr(engine.facts, "patches", ())
                   if p["role"] == "engine.test_patches"}
    record = collect.collect(engine.facts if engine else None, used,
                             server_env(loaded.suite, fit, engine.facts if engine else None),
                             getattr(data, "source", None), getattr(data, "sha256", None),
                             loaded.suite.workload.seed, weights_sha256=weights,
                             stand_ins_sha256=stand_ins, test_patches_sha256=patches)
    if isinstance(loaded.suite.engine, ReferenceEngine):  # the device it launches on
        record.device = engine_device(loaded.suite)
    return record


def draw_plot(run_dir: Path, results_dir: Path) -> Path | None:
    """The run against its suite's baselines and floor; a failed plot never fails a run."""
    try:
        from harness.analysis import plots

        return plots.plot_run(run_dir, results_root=results_dir)
    except Exception as error:  # plotting is a by-product; the record is already written
        # (Ctrl-C and SIGTERM are KeyboardInterrupts: they pass through and stop the run)
        print(f"warning: could not draw the plot for {run_dir}: {error_text(error)}",
              file=sys.stderr)
        return None
