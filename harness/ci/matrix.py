"""The nightly job matrix: one entry per suite, on the runner its topology needs.

Runners are declared in `ci/runners.toml` (label, GPU count, GPU type, memory per
GPU, or a GitHub-hosted image for CPU suites). A suite goes to the smallest runner
that fits its topology; the result is `{"include": [...]}`, ready for
`strategy.matrix: ${{ fromJSON(...) }}` in GitHub Actions.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from harness.errors import BadInput
from harness.files import SUITES_DIR
from harness.results.record import GPUInfo
from harness.run.preflight import check_fit
from harness.secrets import redact_text
from harness.suite.document import DocumentError, load_toml
from harness.suite.model import LoadedSuite
from harness.suite.serving import Topology

REPO_ROOT = SUITES_DIR.parent
RUNNERS_FILE = REPO_ROOT / "ci" / "runners.toml"
NOXFILE = REPO_ROOT / "noxfile.py"
GENERIC_SESSION = "suite"  # `nox -s suite -- SUITE` runs any suite


class Runner(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    label: str = Field(min_length=1)
    gpus: int = Field(ge=0)
    gpu: str | None = None  # type, e.g. "H100"
    memory_gib: float = Field(default=0.0, ge=0)
    hosted: str | None = None  # a GitHub-hosted image (e.g. ubuntu-latest) instead


class RunnerConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    runner: list[Runner] = Field(min_length=1)
    suites: dict[str, str] = Field(default_factory=dict)  # suite name -> label override


def load_runners(path: Path = RUNNERS_FILE) -> RunnerConfig:
    try:
        document = load_toml(Path(path).read_text(encoding="utf-8"))
    except OSError as error:
        raise BadInput(f"{path}: cannot read runner config: {error.strerror}") from None
    except UnicodeDecodeError as error:
        raise BadInput(f"{path}: runner config is not UTF-8 text: {error}") from None
    except DocumentError as error:  # not TOML, nested past parsing, a number not finite
        raise BadInput(f"{path}: {error}") from None
    try:
        config = RunnerConfig.model_validate(document)
    except ValidationError as error:
        raise BadInput(f"{path}: invalid runner config:\n{error}") from None
    labels = [runner.label for runner in config.runner]
    if len(set(labels)) != len(labels):
        raise BadInput(f"{path}: runner labels must be unique: {labels}")
    return config


def _accepts(topology: Topology, runner: Runner) -> int | None:
    """Preference rank of this runner's GPU type for the topology (lower first), or None."""
    if runner.gpus < topology.gpus:
        return None
    if topology.gpus == 0:
        return 0
    gpus = [GPUInfo(index=i, name=runner.gpu or "", memory_gib=runner.memory_gib)
            for i in range(runner.gpus)]  # fmt: skip
    if not check_fit(topology, gpus).fits:
        return None
    name = (runner.gpu or "").upper()
    ranks = [i for i, kind in enumerate(topology.gpu_types) if kind.upper() in name]
    return ranks[0] if ranks else 0


def pick_runner(loaded: LoadedSuite, config: RunnerConfig) -> Runner:
    suite = loaded.suite
    by_label = {runner.label: runner for runner in config.runner}
    if suite.name in config.suites:
        label = config.suites[suite.name]
        if label not in by_label:
            raise BadInput(f"[suites] {suite.name} = {label!r}: no [[runner]] has that label")
        return by_label[label]
    fitting = []
    for order, runner in enumerate(config.runner):
        rank = _accepts(suite.topology, runner)
        if rank is not None:
            fitting.append((runner.gpus, rank, order, runner))
    if not fitting:
        topology = suite.topology
        kinds = "/".join(topology.gpu_types) or "any GPU"
        raise BadInput(
            f"{loaded.path}: no runner in the runner config fits {topology.gpus} x {kinds} "
            f"with >= {topology.min_memory_gib:g} GiB; add a [[runner]] to ci/runners.toml"
        )
    # fewest GPUs first: a CPU suite lands on a CPU runner when there is one
    return min(fitting, key=lambda item: item[:3])[3]


def nox_sessions(noxfile: Path = NOXFILE) -> dict[str, str]:
    """suite file stem -> nox session, read (not executed) from noxfile's SUITE_SESSIONS."""
    try:
        tree = ast.parse(noxfile.read_text(encoding="utf-8"))
    except (OSError, SyntaxError):
        return {}
    for node in tree.body:
        if not isinstance(node, ast.Assign | ast.AnnAssign) or node.value is None:
            continue
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        if any(isinstance(t, ast.Name) and t.id == "SUITE_SESSIONS" for t in targets):
            try:
                sessions = ast.literal_eval(node.value)
            except ValueError:
                return {}
            return {suite: session for session, suite in sessions.items()}
    return {}


@dataclass(frozen=True)
class MatrixEntry:
    suite: str
    file: str
    session: str
    runner: str
    runs_on: str | list[str]
    gpus: int
    nightly: bool
    build: str | None = None  # the build spec this job tests (None: the suite's default)
    build_label: str | None = None  # recorded with the run; the trend keeps one line each

    def as_json(self) -> dict[str, object]:
        return dict(self.__dict__)


def parse_builds(items: Sequence[str]) -> list[tuple[str, str]]:
    """`LABEL=SPEC` pairs (`main=git+...@<sha>`, `release=sglang==0.5.23`)."""
    builds = []
    for item in items:
        label, sep, spec = item.partition("=")
        if not sep or not label.strip() or not spec.strip() or not label.isidentifier():
            raise BadInput(f"--build {redact_text(item)!r}: expected LABEL=SPEC, e.g. "
                           "release=sglang==0.5.23")
        if redact_text(spec) != spec:  # the matrix is printed in every job's log
            raise BadInput(f"--build {redact_text(item)!r}: a build spec in the matrix may not "
                           "carry credentials (they would be printed in the workflow's logs); "
                           "give them to git instead (a credential helper or GIT_ASKPASS)")
        builds.append((label.strip(), spec.strip()))
    labels = [label for label, _ in builds]
    if len(set(labels)) != len(labels):
        raise BadInput(f"--build labels must be unique: {labels}")
    return builds


def build_matrix(
    suites: Sequence[LoadedSuite],
    config: RunnerConfig,
    sessions: dict[str, str] | None = None,
    root: Path = REPO_ROOT,
    builds: Sequence[tuple[str, str]] = (),
) -> dict[str, list[dict[str, object]]]:
    """`{"include": [...]}` sorted by runner, suite, build; [] include when nothing to run.

    With `builds`, every suite that runs SGLang gets one job per (label, spec); suites of
    the reference engine run once (their builds are not SGLang's)."""
    sessions = nox_sessions() if sessions is None else sessions
    entries = []
    for loaded in suites:
        runner = pick_runner(loaded, config)
        path = Path(loaded.path).resolve()
        file = str(path.relative_to(root)) if path.is_relative_to(root) else str(loaded.path)
        base = MatrixEntry(
            suite=loaded.suite.name,
            file=file,
            session=sessions.get(path.stem, GENERIC_SESSION),
            runner=runner.label,
            runs_on=runner.hosted or ["self-hosted", runner.label],
            gpus=loaded.suite.topology.gpus,
            nightly=loaded.suite.nightly,
        )  # fmt: skip
        if builds and loaded.suite.engine.kind == "sglang":
            entries += [replace(base, build=spec, build_label=label) for label, spec in builds]
        else:
            entries.append(base)
    entries.sort(key=lambda entry: (entry.runner, entry.suite, entry.build_label or ""))
    return {"include": [entry.as_json() for entry in entries]}
