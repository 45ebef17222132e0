"""Strict runs: `nox -s tests` (HARNESS_STRICT_SKIPS=1) fails any test that skips.

A skip there means a part of the harness went untested (a wheel, the data or the reference
extra missing), which CI must not report as green. Locally, skips stay skips and say why.

Expensive results shared by the xdist workers of one session (made by the first worker
that needs them, under a file lock, read by the others): `tests/shared.py`.

Fixtures used by more than one test folder live in `tests/fixtures/`, registered here for
every test: shipped suites and a clean host, the SGLang test double, a results folder.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Generator
from typing import Any

import pytest

pytest_plugins = ["tests.fixtures.suites_and_host", "tests.fixtures.sglang_double",
                  "tests.fixtures.results", "tests.fixtures.stored_runs",
                  "tests.fixtures.sglang_cpu"]

# No model hub can be reached here. huggingface_hub reads HF_HUB_OFFLINE once, when it is
# first imported, so it is set before any test module imports it: a hub id (the SGLang
# double's suites name one) then fails at once instead of after five retries with backoff,
# about 23 s of every such run (tests/test_session_is_offline.py).
os.environ.setdefault("HF_HUB_OFFLINE", "1")

# No time limit per example: the fuzz tests run on two cores beside servers and whole runs,
# where one example of a few milliseconds can take hundreds (an example over hypothesis's
# default 200 ms failed CI as "unreliable"). What an example must not do is still each
# test's own assertion; a test that needs a bound on time is a benchmark. The sessions that
# run a few oracle tests in an engine's own environment (`nox -s sglang_args`) have no
# hypothesis, and no test there uses it.
try:
    from hypothesis import settings
except ModuleNotFoundError:
    pass
else:
    settings.register_profile("shared_cores", deadline=None)
    settings.load_profile("shared_cores")

# A non-interactive shell starts its background jobs with SIGINT ignored, and a child
# inherits an ignored signal across exec: the harness processes the tests signal with
# SIGINT (Ctrl-C) would never see it. A Python handler is reset to the default on exec, so
# with one installed here every child starts with Ctrl-C's usual meaning.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The modules sharing a server are listed for the scheduler (tests/xdist_scheduling.py)."""
    from tests.xdist_scheduling import check_server_groups

    check_server_groups(items)


@pytest.hookimpl(optionalhook=True)  # the hook exists only where xdist is loaded
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`--dist loadgroup`: loadscope with the modules sharing a server as one unit."""
    if config.getoption("dist") != "loadgroup":
        return None
    from tests.xdist_scheduling import scheduler

    return scheduler(config, log)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: Any) -> Generator[None, Any, None]:
    outcome = yield
    report = outcome.get_result()
    if (report.skipped and os.environ.get("HARNESS_STRICT_SKIPS") == "1"
            and not hasattr(report, "wasxfail")):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = f"skipped in a strict run (HARNESS_STRICT_SKIPS=1): {reason}"


@pytest.fixture(autouse=True)
def _fresh_secret_mask() -> Generator[None, None, None]:
    """Each test starts with no registered secret (harness.secrets): the CLI registers what
    it learns for its process, and a test is a process of its own here."""
    from harness import secrets

    secrets.forget()
    yield
    secrets.forget()
