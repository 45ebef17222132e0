"""The real SGLang 0.5.23 on CPU (`nox -s sglang_cpu`): its engine environment, built by
the harness's own build machinery, shared by every test here.

One real NGRAM server (`ngram_server`) is shared by the tests that only ask it questions:
SGLang's own clients and the A/A nightly history, each measured window after a flush.

These tests need that environment (about 8 minutes to build, 4 GB, cached under
HARNESS_CACHE); `nox -s tests` leaves this folder to `nox -s sglang_cpu`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from harness import builds
from harness.engines.sglang.launch import launch_command
from harness.run import plan
from harness.run.launch import Server, ServerSpec, free_port
from harness.suite.checkpoints import resolve_models
from harness.suite.model import load_suite
from tests.fixtures.sglang_cpu import SGLANG_CPU_SPEC

SPEC = SGLANG_CPU_SPEC  # the environment: the `sglang_cpu` fixture (tests/fixtures)
REPO = builds.REPO_ROOT
STAND_IN = REPO / "tests" / "cpu_stand_ins"


@pytest.fixture(scope="session")
def tiny_causal_draft(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.sglang_cpu.tiny_causal_draft import TARGET, cut

    return cut(TARGET, tmp_path_factory.mktemp("draft") / "tiny-causal-draft")


NGRAM_SUITE = REPO / "suites" / "tiny_ngram_sglang_cpu.toml"


@contextlib.contextmanager
def serving_ngram_suite(python: str, env: Mapping[str, str], log: Path) -> Iterator[str]:
    """The NGRAM CPU suite's launch line (from the harness's own adapter) run by `python`
    with `env`, ready: its URL; stopped after."""
    suite, port = load_suite(NGRAM_SUITE).suite, free_port()
    server = Server(ServerSpec(
        command=launch_command(suite, python, "127.0.0.1", port, resolve_models(suite)),
        log_path=log, port=port, env=dict(env), launch_timeout_s=900))
    server.start()
    try:
        server.wait_ready()
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


@pytest.fixture(scope="session")
def ngram_server(sglang_cpu: builds.PreparedBuild,
                 tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The real NGRAM server (the harness's launch line and environment), started once:
    its URL. A harness run attached to it flushes it before measuring, so what it answered
    earlier leaves no trace."""
    env = plan.server_env(load_suite(NGRAM_SUITE).suite, None, sglang_cpu.facts)
    with serving_ngram_suite(sglang_cpu.python, env,
                             tmp_path_factory.mktemp("ngram-server") / "server.log") as url:
        yield url
