"""pytest plugin: `pytest --suites suites/ -n N` runs each suite TOML as a test.

Registered as the `harness_suites` pytest11 entry point, so it loads in every
pytest run of an environment where the harness is installed: it stays inert
(no collection, no fixtures, no heavy imports) unless `--suites` is given.

Each suite becomes one item with markers for its topology (`gpus(n)`, `tp(n)`)
and engine (`engine_sglang` / `engine_reference`, `nightly`). An item leases the
GPUs its topology needs from the file-locked allocator (shared by all xdist
workers of the session, or by several sessions through $HARNESS_GPU_LOCK_DIR),
hands them to the runner (which sets CUDA_VISIBLE_DEVICES for the server), and
maps the verdict: pass -> passed, fail / error -> failed with the reasons,
skipped -> skipped with the reason. GPUs that the inventory lacks, or that stay
busy past `--gpu-wait`, skip the suite with the reason.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from harness.errors import HarnessError
from harness.files import default_results_dir
from harness.secrets import redact_text

if TYPE_CHECKING:
    from harness.ci.gpu_allocator import GPUAllocator
    from harness.suite.model import LoadedSuite

LOCK_DIR_ENV = "HARNESS_GPU_LOCK_DIR"  # same name as harness.ci.gpu_allocator.LOCK_DIR_ENV
WORKERINPUT_KEY = "harness_gpu_lock_dir"
DEFAULT_RUNNER = "harness.run.runner"
MARKERS = (
    "gpus(n): the suite's topology needs n GPUs (select with -m 'gpus(n=2)')",
    "tp(n): the suite's tensor-parallel size",
    "engine_sglang: the suite runs the SGLang build under test",
    "engine_reference: the suite runs the CPU reference engine",
    "nightly: the suite is part of the nightly set",
)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("harness", "speculative-decoding acceptance suites")
    group.addoption(
        "--suites",
        action="append",
        default=[],
        metavar="PATH",
        help="collect suite TOML files (or folders of them) as tests; repeatable",
    )
    group.addoption(
        "--sglang",
        default=None,
        metavar="SPEC",
        help="SGLang build under test (pip requirement, git URL@ref or local checkout)",
    )
    group.addoption(
        "--results-dir",
        default=None,
        metavar="DIR",
        help="where run records are written (default: $HARNESS_RESULTS, else results)",
    )
    group.addoption(
        "--gpu-wait",
        type=float,
        default=3600.0,
        metavar="SECONDS",
        help="how long a suite waits for busy GPUs before it is skipped (default 3600)",
    )
    group.addoption(
        "--gpu-lock-dir",
        default=None,
        metavar="DIR",
        help=f"allocator state shared by all processes leasing GPUs (default: ${LOCK_DIR_ENV}, "
        "else a folder private to this pytest session)",
    )
    group.addoption(
        "--require-fit",
        action="store_true",
        help="a suite this host cannot run (topology, GPUs) fails instead of skipping: for a "
        "nightly job placed on a runner chosen to fit it",
    )
    group.addoption(
        "--label",
        default=None,
        metavar="LABEL",
        help="label recorded with every run (e.g. main, release): one trend line per label",
    )
    group.addoption(
        "--against",
        default=None,
        metavar="SPEC",
        help="judge each suite also against reference build SPEC, paired by question (the "
        "suite's [gate]; harness run --against): reused when stored and the same, else run first",
    )
    group.addoption(
        "--against-label",
        default="against",
        metavar="LABEL",
        help="label recorded with the reference runs (e.g. release)",
    )
    group.addoption(
        "--harness-runner",
        default=DEFAULT_RUNNER,
        metavar="MODULE",
        help="module providing RunOptions and run_suite (default: harness.run.runner)",
    )


def _enabled(config: pytest.Config) -> bool:
    return bool(config.getoption("suites", default=None))


def pytest_configure(config: pytest.Config) -> None:
    if not _enabled(config):
        return
    for marker in MARKERS:
        config.addinivalue_line("markers", marker)
    suite_paths = [str(Path(p)) for p in config.getoption("suites")]
    if config.args_source != pytest.Config.ArgsSource.ARGS:
        # `pytest --suites suites/` alone runs the suites, not also the configured testpaths
        config.args[:] = suite_paths
    else:
        config.args.extend(p for p in suite_paths if p not in config.args)
    config.stash[_LOCK_DIR] = _lock_dir(config)
    config.pluginmanager.register(_XdistHooks(), "harness-suites-xdist")


def _lock_dir(config: pytest.Config) -> Path:
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None and WORKERINPUT_KEY in workerinput:
        return Path(workerinput[WORKERINPUT_KEY])  # chosen by the xdist controller
    chosen = config.getoption("gpu_lock_dir") or os.environ.get(LOCK_DIR_ENV)
    if chosen:
        return Path(chosen)
    private = Path(tempfile.mkdtemp(prefix="harness-gpu-leases-"))
    config.add_cleanup(lambda: shutil.rmtree(private, ignore_errors=True))
    return private


class _XdistHooks:
    """Hands the controller's lock folder to every worker, so they share one allocator."""

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput[WORKERINPUT_KEY] = str(node.config.stash[_LOCK_DIR])


_LOCK_DIR = pytest.StashKey[Path]()
_ALLOCATOR = pytest.StashKey["GPUAllocator"]()


def _suite_roots(config: pytest.Config) -> list[Path]:
    base = config.invocation_params.dir
    return [(base / p).resolve() for p in config.getoption("suites")]


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    config = parent.config
    if not _enabled(config) or file_path.suffix != ".toml":
        return None
    resolved = file_path.resolve()
    if any(resolved == root or root in resolved.parents for root in _suite_roots(config)):
        return SuiteFile.from_parent(parent, path=file_path)
    return None


class SuiteFile(pytest.File):
    def collect(self) -> list[pytest.Item]:
        from harness.suite.model import load_suite

        try:
            loaded = load_suite(self.path)
        except HarnessError as error:
            raise self.CollectError(error.message) from None
        item = SuiteItem.from_parent(self, name=loaded.suite.name, loaded=loaded)
        topology = loaded.suite.topology
        item.add_marker(pytest.mark.gpus(topology.gpus, n=topology.gpus))
        item.add_marker(pytest.mark.tp(topology.tp_size, n=topology.tp_size))
        item.add_marker(f"engine_{loaded.suite.engine.kind}")
        if loaded.suite.nightly:
            item.add_marker("nightly")
        return [item]


class SuiteVerdict(Exception):
    """A suite that ran and did not pass: its verdict and reasons, shown without traceback."""

    def __init__(self, status: str, exit_code: int, reasons: list[str],
                 run_dir: Path | None) -> None:
        self.status = status
        self.exit_code = exit_code
        self.reasons = reasons
        self.run_dir = run_dir
        super().__init__(self.describe())

    def describe(self) -> str:
        lines = [f"verdict {self.status} (exit {self.exit_code})"]
        lines += [f"  - {reason}" for reason in self.reasons or ["no reason given"]]
        if self.run_dir is not None:
            lines.append(f"  record: {self.run_dir}")
        return "\n".join(lines)


def _allocator(config: pytest.Config) -> GPUAllocator:
    if _ALLOCATOR not in config.stash:
        from harness.ci.gpu_allocator import GPUAllocator
        from harness.run.preflight import gpu_inventory

        config.stash[_ALLOCATOR] = GPUAllocator(config.stash[_LOCK_DIR], gpu_inventory())
    return config.stash[_ALLOCATOR]


def _run_options(config: pytest.Config, options_type: Any, devices: Any) -> dict[str, Any]:
    options: dict[str, Any] = {
        "results_dir": config.invocation_params.dir / (config.getoption("results_dir")
                                                       or default_results_dir()),
        "gpu_devices": list(devices),
        "sglang": config.getoption("sglang"),
    }
    if config.getoption("label"):
        options["label"] = config.getoption("label")
    fields = dataclasses.fields(options_type) if dataclasses.is_dataclass(options_type) else ()
    if "progress" in {field.name for field in fields}:
        options["progress"] = False  # a progress bar per worker garbles pytest's output
    return options


def _worker_name(config: pytest.Config) -> str:
    workerinput = getattr(config, "workerinput", None)
    return workerinput.get("workerid", "main") if workerinput else "main"


class SuiteItem(pytest.Item):
    def __init__(self, *, loaded: LoadedSuite, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.loaded = loaded

    def runtest(self) -> None:
        from harness.ci.gpu_allocator import GPUUnavailable, LeaseTimeout

        config = self.config
        runner = importlib.import_module(config.getoption("harness_runner"))
        allocator = _allocator(config)
        owner = f"{_worker_name(config)}:{self.nodeid}"
        try:
            lease = allocator.acquire(
                self.loaded.suite.topology, owner=owner, timeout_s=config.getoption("gpu_wait")
            )
        except (GPUUnavailable, LeaseTimeout) as error:
            self._unfit(error.message)
        self.user_properties.append(("gpu_devices", ",".join(map(str, lease.devices))))
        self.user_properties.append(("worker", _worker_name(config)))
        try:
            options = runner.RunOptions(**_run_options(config, runner.RunOptions, lease.devices))
            against = config.getoption("against")
            if against:
                from harness.protocols.pairing import check_against, run_paired

                check_against(self.loaded, against)  # a malformed spec: BadInput, as the CLI
                outcome = run_paired(self.loaded, options, against,
                                     config.getoption("against_label"))
                record = getattr(outcome, "record", None)
                if record is not None and record.paired is not None:
                    self.user_properties.append(("paired", record.paired.status))
            else:
                outcome = runner.run_suite(self.loaded, options)
        finally:
            allocator.release(lease)
        self._judge(outcome)

    def _judge(self, outcome: Any) -> None:
        reasons = [str(reason) for reason in getattr(outcome, "reasons", []) or []]
        run_dir = getattr(outcome, "run_dir", None)
        if run_dir is not None:
            self.user_properties.append(("run_dir", str(run_dir)))
        status = str(outcome.status)
        self.user_properties.append(("verdict", status))
        if status == "pass":
            return
        if status == "skipped":
            self._unfit("; ".join(reasons) or "skipped by the runner")
        raise SuiteVerdict(status, int(outcome.exit_code), reasons, run_dir)

    def _unfit(self, reason: str) -> None:
        """Skip a suite this host cannot run, or fail it loudly under --require-fit."""
        if self.config.getoption("require_fit"):
            raise SuiteVerdict("error", 4, [f"this runner cannot run the suite: {reason} "
                                            "(--require-fit)"], None)
        pytest.skip(reason)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        """The verdict, or the error's own line; a traceback (a harness bug) without the
        frames' arguments, which hold the suite and so its secrets. What is printed here
        goes to the terminal and to JUnit's failure text: secrets redacted."""
        error = excinfo.value
        if isinstance(error, SuiteVerdict):
            text = error.describe()
        elif isinstance(error, HarnessError):
            text = f"{type(error).__name__}: {error.message}"
        else:
            text = str(excinfo.getrepr(funcargs=False, showlocals=False,
                                       style=style or "long", truncate_locals=True))
        return redact_text(text)  # the suite's secrets were registered at its load

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, f"suite {self.name}"
