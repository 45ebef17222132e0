"""The tests' own xdist scheduler (tests/xdist_scheduling.py): modules sharing a server
are one unit, every other module its own, and the table stays true to the fixtures."""

from __future__ import annotations

import ast
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests.xdist_scheduling import (
    SERVER_GROUPS,
    check_server_groups,
    heavy_first,
    scheduler,
    scope_of,
)

ROOT = Path(__file__).resolve().parents[1]


def test_the_modules_sharing_a_server_are_one_unit_and_the_rest_their_modules() -> None:
    listed = sorted(SERVER_GROUPS)
    assert {scope_of(f"{module}::test_a[x@y]") for module in listed} == {
        "reference_engine_server"}
    assert scope_of("tests/run/test_attach.py::test_a[dp@2]") == "tests/run/test_attach.py"
    assert scope_of("tests/run/test_x.py::Case::test_b") == "tests/run/test_x.py::Case"


@pytest.mark.parametrize("module", sorted(SERVER_GROUPS))
def test_every_listed_module_asks_for_the_server(module: str) -> None:
    tree = ast.parse((ROOT / module).read_text())
    arguments = {arg.arg for node in ast.walk(tree)
                 if isinstance(node, ast.FunctionDef) for arg in node.args.args}
    assert "server" in arguments, f"{module} no longer uses the shared server"


def test_a_module_using_the_server_that_is_not_listed_stops_the_session() -> None:
    def item(nodeid: str) -> Any:  # what the check reads of a collected test
        return SimpleNamespace(nodeid=nodeid, fixturenames=["tmp_path", "server"])

    with pytest.raises(pytest.UsageError, match=r"test_new\.py \(group 'reference_engine_"
                                                r"server'\)"):
        check_server_groups([item("tests/reference_engine/test_new.py::test_it")])
    # the same name elsewhere is another fixture; a listed module passes
    check_server_groups([item("tests/run/test_new.py::test_it"),
                         item(f"{sorted(SERVER_GROUPS)[0]}::test_it")])


def _collected(nodeid: str, *markers: str) -> Any:
    """What the sort reads of a collected test: its node id and its markers."""
    return SimpleNamespace(nodeid=nodeid, get_closest_marker=lambda name: (
        name if name in markers else None))


def test_units_holding_whole_runs_go_first_then_slow_ones_each_kept_whole() -> None:
    items = [_collected("tests/a/test_many.py::test_1"),
             _collected("tests/a/test_many.py::test_2"),
             _collected("tests/b/test_engine.py::test_1", "slow"),
             _collected("tests/c/test_runs.py::test_quick"),
             _collected("tests/c/test_runs.py::test_whole_run", "slow", "e2e"),
             _collected(f"{sorted(SERVER_GROUPS)[0]}::test_1", "slow"),
             _collected("tests/d/test_more.py::test_1")]
    heavy_first(items)
    assert [item.nodeid for item in items] == [
        "tests/c/test_runs.py::test_quick",  # its unit holds a whole run: the unit first
        "tests/c/test_runs.py::test_whole_run",
        "tests/b/test_engine.py::test_1",
        f"{sorted(SERVER_GROUPS)[0]}::test_1",
        "tests/a/test_many.py::test_1",
        "tests/a/test_many.py::test_2",
        "tests/d/test_more.py::test_1"]


class _Worker:
    """A node as xdist's scheduler drives it: the indexes it was sent, in order."""

    def __init__(self, name: str) -> None:
        self.gateway = SimpleNamespace(id=name)
        self.sent: list[int] = []
        self.shutting_down = False

    def send_runtest_some(self, indexes: list[int]) -> None:
        self.sent.extend(indexes)

    def shutdown(self) -> None:
        pass


def test_the_scheduler_hands_units_out_in_the_collections_order() -> None:
    """Not loadscope's default (the units with most tests first), which sent the few-test
    units of whole runs out last."""
    pytest.importorskip("xdist")
    option = SimpleNamespace(loadscopereorder=True, tx=["2*popen"], numprocesses=2)
    config: Any = SimpleNamespace(option=option,
                                  getvalue=lambda name: getattr(option, name, None))
    chosen = scheduler(config, None)
    collection = ["tests/heavy/test_run.py::test_whole_run"] + [
        f"tests/light/test_many.py::test_{n}" for n in range(6)] + [
        "tests/other/test_two.py::test_1", "tests/other/test_two.py::test_2"]
    workers = [_Worker("gw0"), _Worker("gw1")]
    for worker in workers:
        chosen.add_node(worker)
        chosen.add_node_collection(worker, collection)
    chosen.schedule()
    # the whole run went out first, though its unit has the fewest tests
    assert workers[0].sent[0] == 0
    assert workers[1].sent[:6] == list(range(1, 7))
