"""The identity of a measurement: what a stored run of the reference build must share with
the run that would be made now to be reused in its place (`harness.protocols.pairing.reusable`).
Its own module so that the runner (which records the served models) and the pairing
(which compares identities) both import it without a circle."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from harness.results.record import BuildInfo, Provenance, RunRecord, WorkloadInfo
from harness.suite.checkpoints import Models

# The identity of a measurement: a stored run of A is reused only when all of these match:
# everything that changes the figure (issue 27, case 4) -- the suite, the data and the
# prompts as the harness sends them, the harness's own commit and dirty state (its
# prompt rendering, its grading), the engine build, the served target and draft (paths,
# ids, revisions) and their weights' hashes where computable, the GPUs, driver, TP size,
# and for a CPU engine (no GPU) the host CPU model and its vector instructions.
IDENTITY_FIELDS = ("suite_sha256", "data_sha256", "prompts_sha256", "engine", "git_sha",
                   "git_dirty", "source_hash", "patch_sha256", "freeze_sha256",
                   "build_options", "served", "weights_sha256", "gpus", "driver", "tp_size",
                   "harness_version", "harness_git_sha", "harness_git_dirty", "cpu",
                   "cuda", "torch")


def identity(suite_sha256: str | None, document: Mapping[str, object], build: BuildInfo,
             provenance: Provenance, workload: WorkloadInfo | None) -> dict[str, object]:
    """The fields of a measurement (its suite, build, provenance and workload as a record
    keeps them) that make two measurements the same."""
    gpus = sorted(gpu.name for gpu in provenance.gpus)
    options = dict(build.model_dump(mode="json", include={"options"})["options"])
    served = options.pop(SERVED_KEY, None)
    topology = document.get("topology")  # the suite document: the suite's own TOML
    return {
        "suite_sha256": suite_sha256,
        "data_sha256": (workload.data_sha256 if workload else None) or provenance.data_sha256,
        "prompts_sha256": workload.prompts_sha256 if workload else None,
        "engine": build.engine, "git_sha": build.git_sha,
        "git_dirty": build.git_dirty, "source_hash": build.source_hash,
        "patch_sha256": build.patch_sha256, "freeze_sha256": build.freeze_sha256,
        "build_options": options, "served": served,
        "weights_sha256": provenance.weights_sha256,
        "gpus": gpus,
        "driver": provenance.driver,
        "tp_size": topology.get("tp_size", 1) if isinstance(topology, Mapping) else 1,
        "harness_version": provenance.harness_version,
        "harness_git_sha": provenance.harness_git_sha,
        "harness_git_dirty": provenance.harness_git_dirty,
        # a CPU engine's figures depend on the CPU's kernels (its vector instructions)
        "cpu": None if gpus else [provenance.cpu, sorted(provenance.cpu_isa)],
        "cuda": provenance.cuda, "torch": provenance.torch,
    }


def identity_of(record: RunRecord) -> dict[str, object]:
    """A stored run's identity (`identity`), from its typed record."""
    return identity(record.suite.sha256, record.suite.document, record.build,
                    record.provenance, record.workload)


SERVED_KEY = "served"  # build.options key: the target and draft the server was given


def served(models: Models | None, checkpoints: tuple[Path, Path] | None = None
           ) -> dict[str, str | None] | None:
    """The served target and draft (paths or hub ids, revisions) as a build option, so a
    record names them and a reuse compares them."""
    if checkpoints is not None:
        return {"target": str(checkpoints[0]), "draft": str(checkpoints[1])}
    if models is None:
        return None
    return {"target": models.target, "target_revision": models.target_revision,
            "draft": models.draft, "draft_revision": models.draft_revision}
