"""The engine build under test, and the Python environment it runs from.

One grammar for build specs (`spec`), resolved to an identity (`sglang_env`,
`reference`) that keys the build cache; one git helper (`gitrepo`); one probe of
another interpreter (`probe`); bounded waits and stale-build cleanup (`common`).
The harness process never imports the engine or torch.
"""

from __future__ import annotations

from harness.builds.common import (
    INSTALL_TIMEOUT_S,
    bounded_lock,
    file_sha256,
    pid_alive,
    run_command,
    sweep_stale,
)
from harness.builds.gitrepo import head_state
from harness.builds.probe import (
    BUILD_NOTE,
    FREEZE_FILE,
    REFERENCE_MODULES,
    EnvironmentFacts,
    copy_freeze,
    probe_environment,
    save_freeze,
)
from harness.builds.reference import (
    REPO_ROOT,
    ReferenceBuild,
    has_reference_dependencies,
    prepare_reference_env,
    resolve_reference_build,
)
from harness.builds.sglang_env import (
    PreparedBuild,
    ResolvedBuild,
    folder_sha256,
    planned_python,
    prepare,
    resolve_build,
    snapshot_source,
)
from harness.builds.spec import (
    GRAMMAR,
    BuildKind,
    BuildSpec,
    EngineKind,
    check_engine,
    parse_build_spec,
    split_git_url,
)
from harness.builds.vllm_env import planned_python as planned_vllm_python
from harness.builds.vllm_env import prepare as prepare_vllm
from harness.builds.vllm_env import vllm_version
from harness.errors import error_text
from harness.files import CACHE_ENV, cache_root

__all__ = [
    "BUILD_NOTE",
    "CACHE_ENV",
    "FREEZE_FILE",
    "GRAMMAR",
    "INSTALL_TIMEOUT_S",
    "REFERENCE_MODULES",
    "REPO_ROOT",
    "BuildKind",
    "BuildSpec",
    "EngineKind",
    "EnvironmentFacts",
    "PreparedBuild",
    "ReferenceBuild",
    "ResolvedBuild",
    "bounded_lock",
    "cache_root",
    "check_engine",
    "copy_freeze",
    "error_text",
    "file_sha256",
    "folder_sha256",
    "has_reference_dependencies",
    "head_state",
    "parse_build_spec",
    "pid_alive",
    "planned_python",
    "planned_vllm_python",
    "prepare",
    "prepare_reference_env",
    "prepare_vllm",
    "probe_environment",
    "resolve_build",
    "resolve_reference_build",
    "run_command",
    "save_freeze",
    "snapshot_source",
    "split_git_url",
    "sweep_stale",
    "vllm_version",
]
