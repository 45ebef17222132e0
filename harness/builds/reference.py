"""Reference-engine builds: settings given inline, or "built" from a git repository.

`reference:policy=regressed,noise=0.1` sets the engine's attention policy and draft
noise. `reference:PATH[@REF]` reads them from `reference-build.toml` in a local git
repository at a commit (or in its working tree): a history of that file is a history
of engine "commits" to bisect. The engine reads the values at launch; the build records
them with the commit they came from.
"""

from __future__ import annotations

import functools
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.builds import gitrepo
from harness.builds.common import short_sha256
from harness.builds.envs import ensure_env
from harness.builds.probe import (
    REFERENCE_MODULES,
    EnvironmentFacts,
    probe_environment,
    save_freeze,
)
from harness.builds.sglang_env import PreparedBuild
from harness.builds.spec import POLICIES, BuildSpec
from harness.errors import BadInput, EngineError
from harness.files import cache_root
from harness.results.record import BuildInfo

CONFIG_FILE = "reference-build.toml"
CONFIG_KEYS = {"attention_policy", "draft_noise"}
REPO_ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class ReferenceBuild:
    """What a reference build changes in the suite's engine, and where it came from."""

    build: BuildSpec
    overrides: dict[str, Any] = field(default_factory=dict)  # attention_policy, draft_noise
    commit: str | None = None
    dirty: bool | None = None
    source_hash: str | None = None


def resolve_reference_build(build: BuildSpec) -> ReferenceBuild:
    """The engine settings a reference build names (empty for the suite as written)."""
    if build.kind == "installed":
        return ReferenceBuild(build)
    if build.kind == "reference":
        return ReferenceBuild(build, dict(build.overrides))
    if build.kind != "reference-repo":
        raise BadInput(f"{build.text!r} is not a reference-engine build")
    repo = Path(build.spec or ".")
    root = gitrepo.toplevel(repo)
    if root is None:
        raise BadInput(f"reference:{repo}: not a git repository")
    where = f"{build.text} ({CONFIG_FILE})"
    if build.ref:
        state = gitrepo.commit_state(root, build.ref)
        assert state.commit is not None
        text = gitrepo.show_file(root, state.commit, CONFIG_FILE)
    else:
        state = gitrepo.working_state(root)
        path = root / CONFIG_FILE
        text = path.read_text() if path.is_file() else None
    if text is None:
        raise EngineError(f"{where}: no {CONFIG_FILE} at "
                          f"{(state.commit or 'the working tree')[:12]}; nothing to build")
    return ReferenceBuild(build, parse_config(text, where), state.commit, state.dirty,
                          f"git-tree:{state.tree}")


def parse_config(text: str, where: str) -> dict[str, Any]:
    """`attention_policy = "fixed"` and `draft_noise = 0.0` (both optional)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise EngineError(f"{where}: not valid TOML: {error}") from None
    unknown = sorted(set(data) - CONFIG_KEYS)
    if unknown:
        raise EngineError(f"{where}: unknown keys {', '.join(unknown)}; "
                          f"allowed: {', '.join(sorted(CONFIG_KEYS))}")
    values: dict[str, Any] = {}
    if "attention_policy" in data:
        if data["attention_policy"] not in POLICIES:
            raise EngineError(f"{where}: attention_policy must be one of {', '.join(POLICIES)}, "
                              f"got {data['attention_policy']!r}")
        values["attention_policy"] = data["attention_policy"]
    if "draft_noise" in data:
        noise = data["draft_noise"]
        if isinstance(noise, bool) or not isinstance(noise, int | float) or not 0 <= noise <= 1:
            raise EngineError(f"{where}: draft_noise must be a number in [0, 1], got {noise!r}")
        values["draft_noise"] = float(noise)
    return values


# One probe (a subprocess) per interpreter and process: the test modules that need the
# extra ask at collection, in every pytest worker.
@functools.cache
def has_reference_dependencies(python: str) -> bool:
    """Whether `python`'s environment can run the reference engine (its extra installed)."""
    try:
        return probe_environment(python).reference_ready
    except EngineError:
        return False


def _extra_requirements() -> list[str]:
    try:
        project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
        return sorted(project["optional-dependencies"]["reference"])
    except (OSError, KeyError, tomllib.TOMLDecodeError):
        return []


def reference_env_dir(requirements: list[str], checkout: Path) -> Path:
    """The cached environment of the reference engine for one checkout. It is an
    editable install of that checkout, so its key holds the checkout's path beside the
    extra's requirements: a second checkout gets its own environment and runs its own
    engine code, the code its record's commit names (issue 27, case 10)."""
    text = "\n".join([*requirements, f"checkout={Path(checkout).resolve()}"])
    return cache_root() / "envs" / f"reference-{short_sha256(text)}"


def prepare_reference_env(
    engine_python: str | None = None, reference: ReferenceBuild | None = None,
) -> PreparedBuild:
    """The reference engine's environment (this one if it has torch & co, else one made
    with this checkout installed editable, keyed by the `reference` extra's requirements
    and the checkout, `reference_env_dir`) and the build's provenance."""
    python = engine_python or sys.executable
    facts = probe_environment(python)
    if not facts.reference_ready:
        if engine_python is not None:
            raise EngineError(f"{python} lacks the reference engine's packages "
                              f"({', '.join(REFERENCE_MODULES)}); install spec-harness[reference]")
        if not (REPO_ROOT / "pyproject.toml").is_file():
            raise EngineError("the reference engine needs spec-harness[reference] installed "
                              "(pip install 'spec-harness[reference]')")
        requirements = _extra_requirements()
        env_dir = reference_env_dir(requirements, REPO_ROOT)
        key = env_dir.name.removeprefix("reference-")
        python = ensure_env(env_dir, "the reference engine",
                            lambda _: ["--editable", f"{REPO_ROOT}[reference]"],
                            {"kind": "reference-env", "requirements": requirements, "key": key,
                             "checkout": str(REPO_ROOT)})
        facts = probe_environment(python)
    return PreparedBuild(python, reference_info(facts, reference), facts)


def reference_info(facts: EnvironmentFacts, reference: ReferenceBuild | None) -> Any:
    if reference is not None and reference.build.kind == "reference-repo":
        commit, dirty, source_hash = reference.commit, reference.dirty, reference.source_hash
    else:  # the engine is the harness's own code
        commit, dirty = gitrepo.head_state(REPO_ROOT, exact=True)
        source_hash = None
    return BuildInfo(
        engine="reference", spec=reference.build.text if reference else None,
        version=facts.versions.get("spec-harness"), git_sha=commit, python=facts.python,
        git_dirty=dirty, source_hash=source_hash,
        ref=reference.build.ref if reference else None,
        options=dict(reference.overrides) if reference else {},
        freeze_sha256=facts.freeze_sha256, freeze_path=str(save_freeze(facts)))
