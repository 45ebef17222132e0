"""`harness run SUITE --server URL`: measure a deployment someone else started (by hand, a
Slurm job, a Kubernetes LeaderWorkerSet, a router in front of a prefill/decode split).

Nothing is launched and nothing is killed. What the run records of the build comes from
the server itself (SGLang's `/server_info` and `/get_model_info`, vLLM's `/version` and
`/v1/models`: the adapter's `identity_paths`), and before any request the server must be
what the suite declares: the model it serves, the speculative algorithm, the draft and the
draft-token count (the adapter's settings check, the one a launched run makes), and the
parallel sizes it reports. A difference is bad input naming the field (exit 2): a figure
measured on another deployment is not the suite's. The flush and the measured window are
the launched run's (an engine that refuses a flush fails as it would there). While the run
measures, the server's liveness route is polled: a deployment that stops answering ends
the run within seconds (exit 3, finished rows kept), as a launched server's death does.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import httpx

from harness.engines.interface import EngineAdapter
from harness.engines.registry import adapter_for
from harness.engines.settings import same_model
from harness.errors import BadInput, EngineError
from harness.results.record import SERVER_LOG, BuildInfo, LaunchInfo
from harness.run import recorded
from harness.run import workload_record as described
from harness.run.drive import Driver, Endpoint
from harness.run.entry_run import EntryRun
from harness.run.heartbeat import say
from harness.run.measuring import measure_entries
from harness.run.outcome import RunOutcome, combined
from harness.secrets import redact_text
from harness.suite.checkpoints import Models
from harness.workloads import prepare

if TYPE_CHECKING:
    from harness import builds
    from harness.results.record import GPUInfo
    from harness.run.preflight import Fit
    from harness.suite.entries import Workload
    from harness.suite.model import Suite

LIVENESS_PERIOD_S = 1.0
LIVENESS_FAILURES = 3  # consecutive failed probes that make the deployment dead
READ_TIMEOUT_S = 30.0


def server_url(text: str) -> str:
    """`URL` of `--server`, checked: http(s), a host, no path beyond `/`, no credentials
    in it (a key goes in the suite's extra_args, which the harness never prints)."""
    parts = urlsplit(text.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise BadInput(f"--server {text!r}: give the server's base URL, e.g. "
                       "http://10.0.0.5:30000")
    if parts.username or parts.password:
        raise BadInput("--server: the URL carries credentials; give the API key as the "
                       "suite's engine.extra_args --api-key instead (it is never printed)")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise BadInput(f"--server {text!r}: the base URL only (no path, query or fragment)")
    return f"{parts.scheme}://{parts.netloc}"


@dataclass
class AttachedSpec:
    """What the driver and the record ask of a server spec."""

    base_url: str
    log_path: Path
    port: int


class AttachedServer:
    """A running deployment: its base URL, and a liveness watch (a thread probing the
    adapter's liveness route) standing in for the process watch of a launched server."""

    def __init__(self, base_url: str, liveness_path: str, headers: Mapping[str, str],
                 log_path: Path) -> None:
        parts = urlsplit(base_url)
        self.spec = AttachedSpec(base_url, log_path,
                                 parts.port or (443 if parts.scheme == "https" else 80))
        self.liveness_path, self.headers = liveness_path, dict(headers)
        self.ready_after_s: float | None = 0.0
        self._failures = 0
        self._last_error = ""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        return self.spec.base_url

    def _watch(self) -> None:
        with httpx.Client(base_url=self.base_url, headers=self.headers, trust_env=False,
                          timeout=httpx.Timeout(5.0, connect=2.0)) as client:
            while not self._stop.wait(LIVENESS_PERIOD_S):
                try:
                    answer = client.get(self.liveness_path)
                    ok = answer.status_code < 500
                    self._last_error = f"{self.liveness_path} answered {answer.status_code}"
                except httpx.HTTPError as error:
                    ok = False
                    self._last_error = f"{type(error).__name__}: {error}"
                self._failures = 0 if ok else self._failures + 1

    def death(self) -> str | None:
        if self._failures >= LIVENESS_FAILURES:
            return (f"the attached server {self.base_url} stopped answering "
                    f"({self._failures} probes of {self.liveness_path} in a row failed, the "
                    f"last: {self._last_error})")
        return None

    def __enter__(self) -> AttachedServer:
        self._thread = threading.Thread(target=self._watch, name="attached-liveness",
                                        daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        """Stop watching; the deployment itself is left running: it is not ours."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10.0)


@dataclass
class AttachedEngine:
    """What the measuring stages ask of an engine, for one nobody here prepared."""

    suite: Suite
    adapter: EngineAdapter
    models: Models | None
    build: BuildInfo
    reports: dict[str, object] = field(default_factory=dict)
    checkpoints: tuple[Path, Path] | None = None
    facts: builds.EnvironmentFacts | None = None
    python: str | None = None


def read_reports(base_url: str, adapter: EngineAdapter, headers: Mapping[str, str]
                 ) -> dict[str, object]:
    """The adapter's identity routes' JSON answers (None for one that does not answer);
    a server that answers none of them is an engine error naming the URL."""
    reports: dict[str, object] = {}
    failures = []
    with httpx.Client(base_url=base_url, headers=dict(headers), trust_env=False,
                      timeout=httpx.Timeout(READ_TIMEOUT_S, connect=5.0)) as client:
        for path in adapter.identity_paths:
            try:
                answer = client.get(path)
            except httpx.HTTPError as error:
                failures.append(f"{path}: {type(error).__name__}: {error}")
                reports[path] = None
                continue
            if answer.status_code in (401, 403):
                raise BadInput(f"{base_url}{path} answered {answer.status_code}: give the "
                               "server's --api-key in the suite's engine.extra_args")
            try:
                reports[path] = answer.json() if answer.status_code == 200 else None
            except ValueError:
                reports[path] = None
            if reports[path] is None:
                failures.append(f"{path}: {answer.status_code}")
    if all(value is None for value in reports.values()):
        raise EngineError(f"no server answers at {base_url} ({'; '.join(failures)})")
    return reports


def mismatches(suite: Suite, adapter: EngineAdapter, models: Models | None,
               reports: Mapping[str, object], info: object) -> list[str]:
    """Each field where the server is not what the suite declares (none: it is)."""
    found = adapter.identity(reports)
    problems = []
    if models is not None and found.get("model") is not None and \
            not same_model(found["model"], models.target):
        problems.append(f"model: the server serves {found['model']!r}, the suite's target is "
                        f"{models.target!r}")
    topology = suite.topology
    side = topology.sides["decode" if topology.disaggregation else "serve"]
    for key, declared in (("tp_size", side.tp_size), ("pp_size", side.pp_size),
                          ("nnodes", topology.nnodes), ("dp_ranks", side.dp_size)):
        reported = found.get(key)
        if reported is not None and reported != declared:
            field_name = "topology.dp_size (DP ranks)" if key == "dp_ranks" else \
                f"topology.{key}"
            problems.append(f"{field_name}: the server runs {reported!r}, the suite declares "
                            f"{declared!r}")
    problems += [f"speculative settings: {problem}"
                 for problem in adapter.settings_mismatches(info, suite, models)]
    return problems


def attached_engine(suite: Suite, adapter: EngineAdapter, models: Models | None, base_url: str,
                    headers: Mapping[str, str], info: object) -> AttachedEngine:
    """The engine record of an attached server, refused (BadInput naming each field) when
    it is not what the suite declares."""
    reports = read_reports(base_url, adapter, headers)
    problems = mismatches(suite, adapter, models, reports, info)
    if problems:
        raise BadInput(f"the server at {redact_text(base_url)} is not what suite {suite.name} "
                       "declares: " + "; ".join(problems))
    found = adapter.identity(reports)
    version = found.get("version")
    build = BuildInfo(engine=suite.engine.kind, spec=f"attached: {redact_text(base_url)}",
                      version=None if version is None else str(version), method="attached",
                      options={"served": {key: value for key, value in found.items()
                                          if value is not None}})
    return AttachedEngine(suite, adapter, models, build, reports)


def first_info(base_url: str, adapter: EngineAdapter, headers: Mapping[str, str],
               workload: Workload) -> object:
    """The server's settings report as a launched run's settings check reads it."""
    driver = Driver(Endpoint(base_url, adapter, dict(headers)), workload)
    info = asyncio.run(driver.server_info())
    if info is None:
        paths = ", ".join(adapter.server_info_paths)
        raise EngineError(f"{base_url} does not answer {paths}: it is not a running "
                          f"{suite_engine_name(adapter)} server")
    return info


def suite_engine_name(adapter: EngineAdapter) -> str:
    return {"sglang": "SGLang", "vllm": "vLLM", "reference": "reference-engine"}.get(
        getattr(adapter, "kind", ""), "engine")


def measure_attached(runs: list[EntryRun], models: Models | None, gpus: Sequence[GPUInfo],
                     fit: Fit) -> RunOutcome:
    """`--server URL`: the deployment is checked against the suite (exit 2 naming each
    field that differs), then measured as a launched one; nothing is started or stopped."""
    first = runs[0]
    suite, options = first.loaded.suite, first.options
    adapter = adapter_for(suite.engine.kind)
    base_url = server_url(options.server or "")
    headers = adapter.auth_headers(suite)
    for run in runs:
        run.stage = "settings check"
    info = first_info(base_url, adapter, headers, suite.workload)
    engine = attached_engine(suite, adapter, models, base_url, headers, info)
    parts = urlsplit(base_url)
    launch = LaunchInfo(command=[], host=parts.hostname or "", launcher="attached",
                        port=parts.port or (443 if parts.scheme == "https" else 80))
    note = ("note: attached to a server this run did not start: the draft's attention "
            "contract was not evaluated (the server's code is not here); its build is what "
            "the server reports")
    plans = []
    for run in runs:
        run.build = engine.build.model_copy(deep=True)
        workload_plan = run.data if run.data is not None else prepare(run.loaded.suite.workload)
        run.planned = sum(len(prompt.turns) for prompt in workload_plan.prompts)
        run.provenance = recorded.provenance(run.loaded, None, gpus, fit, workload_plan)
        run.provenance.server = {path: answer for path, answer in engine.reports.items()
                                 if path != "/server_info"}  # its args: in build.options
        run.workload = described.workload_info(run.loaded.suite, run.entry, workload_plan,
                                               engine)
        run.launch = launch
        if suite.draft and suite.draft.expected_layers:
            run.notes.append(note)
        plans.append(workload_plan)
    with AttachedServer(base_url, adapter.liveness_path, headers,
                               first.run_dir / SERVER_LOG) as server:
        say(f"attached to {base_url}: {engine.build.version or 'version not reported'}")
        measure_entries(runs, engine, server, plans)
    if options.plot:
        for run in runs:
            recorded.draw_plot(run.run_dir, options.results_dir)
    return combined([run.outcome() for run in runs])
