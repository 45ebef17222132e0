"""The identity of a measurement: what a stored run of the reference build must share with
the run that would be made now to be reused in its place (`harness.run.pairing.reusable`).
Its own module so that the runner (which records the served models) and the pairing
(which compares identities) both import it without a circle."""

from __future__ import annotations

from typing import Any

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


def identity(record: dict[str, Any]) -> dict[str, Any]:
    """The fields of a run record (run.json as a dict) that make two measurements the same."""
    build = record.get("build") or {}
    provenance = record.get("provenance") or {}
    suite = record.get("suite") or {}
    document = suite.get("document") or {}
    workload = record.get("workload") or {}
    gpus = sorted(str(g.get("name")) for g in provenance.get("gpus") or [])
    options = dict(build.get("options") or {})
    served = options.pop(SERVED_KEY, None)
    return {
        "suite_sha256": suite.get("sha256"),
        "data_sha256": workload.get("data_sha256") or provenance.get("data_sha256"),
        "prompts_sha256": workload.get("prompts_sha256"),
        "engine": build.get("engine"), "git_sha": build.get("git_sha"),
        "git_dirty": build.get("git_dirty"), "source_hash": build.get("source_hash"),
        "patch_sha256": build.get("patch_sha256"), "freeze_sha256": build.get("freeze_sha256"),
        "build_options": options, "served": served,
        "weights_sha256": provenance.get("weights_sha256"),
        "gpus": gpus,
        "driver": provenance.get("driver"),
        "tp_size": (document.get("topology") or {}).get("tp_size", 1),
        "harness_version": provenance.get("harness_version"),
        "harness_git_sha": provenance.get("harness_git_sha"),
        "harness_git_dirty": provenance.get("harness_git_dirty"),
        # a CPU engine's figures depend on the CPU's kernels (its vector instructions)
        "cpu": None if gpus else [provenance.get("cpu"), sorted(provenance.get("cpu_isa")
                                                                  or [])],
        "cuda": provenance.get("cuda"), "torch": provenance.get("torch"),
    }


SERVED_KEY = "served"  # build.options key: the target and draft the server was given


def served(models: Any, checkpoints: Any = None) -> dict[str, Any] | None:
    """The served target and draft (paths or hub ids, revisions) as a build option, so a
    record names them and a reuse compares them."""
    if checkpoints is not None:
        return {"target": str(checkpoints[0]), "draft": str(checkpoints[1])}
    if models is None:
        return None
    return {"target": models.target, "target_revision": models.target_revision,
            "draft": models.draft, "draft_revision": models.draft_revision}
