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
AUDITED_SGLANG = ["0.5.17", "0.5.23"]

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


def _harness(session: nox.Session, *args: str) -> int:
    """Run the session's `harness` and return its exit code (nox's run hides it)."""
    exe = Path(session.bin) / "harness"
    session.log(f"harness {' '.join(args)}")
    return subprocess.run([str(exe), *args], check=False).returncode


def _run_suite(session: nox.Session, suite: str, reference: bool) -> None:
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
    nox.session(python=PYTHON, name=name)(session_fn)


for _name, _suite in SUITE_SESSIONS.items():
    _make_suite_session(_name, _suite)


@nox.session(python=PYTHON)
def suite(session: nox.Session) -> None:
    """Any suite: nox -s suite -- SUITE [harness run options]."""
    if not session.posargs:
        session.error("usage: nox -s suite -- SUITE [harness run options]")
    _run_suite(session, session.posargs[0], reference=True)


def _fetch_sglang_wheels(session: nox.Session) -> None:
    """The audit tests read SGLang's resolver from these wheels; PyPI is reachable in CI."""
    try:
        session.run("python", "-c",
                    "import sys; from harness.audit.source import fetch_wheels; "
                    "fetch_wheels(sys.argv[2:], sys.argv[1])",
                    str(SGLANG_WHEELS), *AUDITED_SGLANG)
    except nox.command.CommandFailed:
        session.warn("could not download SGLang wheels; the audit's source tests will skip")


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """The test suite, the reference engine end to end included."""
    session.install("-e", ".[test,notebooks,reference]")
    _fetch_sglang_wheels(session)
    env = {"HARNESS_SGLANG_WHEELS": str(SGLANG_WHEELS)}
    if "HARNESS_CACHE" in os.environ:
        env["HARNESS_CACHE"] = os.environ["HARNESS_CACHE"]
    args = session.posargs or ["-n", "2", "--durations=15"]
    session.run("pytest", *args, env=env)


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """ruff, suite validation and GitHub workflow schemas."""
    session.install("-e", ".[test]")
    session.run("ruff", "check", "harness", "tests", "benchmarks", "noxfile.py")
    session.run("harness", "validate", "suites")
    workflows = sorted(str(p) for p in (ROOT / ".github" / "workflows").glob("*.yml"))
    if workflows:
        session.run("check-jsonschema", "--builtin-schema", "vendor.github-workflows",
                    *workflows)


@nox.session(python=PYTHON)
def bench(session: nox.Session) -> None:
    """Benchmarks: each prints its figures and the ratio to its goal."""
    session.install("-e", ".[test,reference]")
    _fetch_sglang_wheels(session)
    for script in sorted((ROOT / "benchmarks").glob("bench_*.py")):
        session.run("python", str(script), env={"HARNESS_SGLANG_WHEELS": str(SGLANG_WHEELS)})
