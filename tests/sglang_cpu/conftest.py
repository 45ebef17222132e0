"""The real SGLang 0.5.23 on CPU (`nox -s sglang_cpu`): its engine environment, built by
the harness's own build machinery, shared by every test here.

One real NGRAM server (`ngram_server`) is shared by the tests that only ask it questions:
SGLang's own clients and the A/A nightly history, each measured window after a flush.

These tests need that environment (about 8 minutes to build, 4 GB, cached under
HARNESS_CACHE); `nox -s tests` leaves this folder to `nox -s sglang_cpu`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from harness import builds
from tests.fixtures.sglang_cpu import SGLANG_CPU_SPEC

SPEC = SGLANG_CPU_SPEC  # the environment: the `sglang_cpu` fixture (tests/fixtures)
REPO = builds.REPO_ROOT
STAND_IN = REPO / "tests" / "cpu_stand_ins"


@pytest.fixture(scope="session")
def tiny_causal_draft(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.sglang_cpu.tiny_causal_draft import TARGET, cut

    return cut(TARGET, tmp_path_factory.mktemp("draft") / "tiny-causal-draft")


@pytest.fixture(scope="session")
def ngram_server(sglang_cpu: builds.PreparedBuild,
                 tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The NGRAM CPU suite's server (its launch line and environment, from the harness's
    own adapter and launch code), started once: its URL. A harness run attached to it
    flushes it before measuring, so what it answered earlier leaves no trace."""
    from harness.engines.sglang.launch import launch_command
    from harness.run import plan
    from harness.run.launch import Server, ServerSpec, free_port
    from harness.suite.checkpoints import resolve_models
    from harness.suite.model import load_suite

    suite, port = load_suite(REPO / "suites" / "tiny_ngram_sglang_cpu.toml").suite, free_port()
    server = Server(ServerSpec(
        command=launch_command(suite, sglang_cpu.python, "127.0.0.1", port,
                               resolve_models(suite)),
        log_path=tmp_path_factory.mktemp("ngram-server") / "server.log", port=port,
        env=plan.server_env(suite, None, sglang_cpu.facts), launch_timeout_s=900))
    server.start()
    try:
        server.wait_ready()
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()
