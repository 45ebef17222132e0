"""Which xdist worker runs what (`--dist loadgroup` in the noxfile's TESTS_ARGS).

A session fixture runs once on every worker that runs a test asking for it. For one that
holds a running server (the reference engine's `server`: torch, the draft and two decoding
workers, each process importing torch: several CPU-seconds to start) that is a start on
each of the four workers.
`loadscope` keeps a module on one worker but spreads the modules; xdist's own `loadgroup`
would spread every unmarked test one by one, and under pytest 9 its marks group nothing
(it renames `item._nodeid`, which pytest 9 no longer reads). This scheduler is `loadscope`
with the modules of SERVER_GROUPS as one unit each: they run on one worker, which starts
their server once.

The scheduler sees node ids only, so the groups are a table; every worker checks it
against the fixtures its collected tests use (`check_server_groups`): a module that uses a
shared server and is missing from it stops the session with a message naming it.
"""

from __future__ import annotations

from typing import Any

import pytest

REFERENCE_SERVER = "reference_engine_server"
# A shared server fixture (the folder whose conftest defines it, its name) -> its group.
SHARED_SERVERS = {("tests/reference_engine/", "server"): REFERENCE_SERVER}
# Each module using one, with its group.
SERVER_GROUPS = {
    module: REFERENCE_SERVER for module in (
        "tests/reference_engine/clients/test_dflash_client_agrees.py",
        "tests/reference_engine/clients/test_sglang_run_eval_agrees.py",
        "tests/reference_engine/test_http_api_accounting.py",
        "tests/reference_engine/test_policies_and_draft_noise.py",
        "tests/reference_engine/test_sglang_routes.py",
        "tests/reference_engine/test_streamed_accounting_equals_unstreamed.py",
    )}


def module_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def server_groups(items: list[pytest.Item]) -> dict[str, str]:
    """Each collected module with a test using a shared server fixture -> its group."""
    groups: dict[str, str] = {}
    for item in items:
        for (folder, fixture), group in SHARED_SERVERS.items():
            if item.nodeid.startswith(folder) and fixture in getattr(item, "fixturenames", ()):
                groups[module_of(item.nodeid)] = group
    return groups


def check_server_groups(items: list[pytest.Item]) -> None:
    """Every collected module using a shared server is in SERVER_GROUPS, in its group
    (a listed module that no longer uses one: tests/test_xdist_scheduling.py)."""
    missing = sorted(f"{module} (group {group!r})" for module, group in
                     server_groups(items).items() if SERVER_GROUPS.get(module) != group)
    if missing:
        raise pytest.UsageError(
            "tests/xdist_scheduling.py: add to SERVER_GROUPS the modules that use a shared "
            "server, or each starts its own on its worker: " + ", ".join(missing))


def scope_of(nodeid: str) -> str:
    """The unit a test is scheduled in: its module's server group where it has one, else
    its module or class, as `loadscope` has it."""
    return SERVER_GROUPS.get(module_of(nodeid)) or nodeid.rsplit("::", 1)[0]


def scheduler(config: pytest.Config, log: Any) -> Any:
    """`loadscope`, with the modules of one server group as one unit (xdist imported here:
    the check above runs in sessions without it too)."""
    from xdist.scheduler import LoadScopeScheduling

    class ModuleOrGroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return scope_of(nodeid)

    return ModuleOrGroupScheduling(config, log)
