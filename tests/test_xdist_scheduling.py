"""The tests' own xdist scheduler (tests/xdist_scheduling.py): modules sharing a server
are one unit, every other module its own, and the table stays true to the fixtures."""

from __future__ import annotations

import ast
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests.xdist_scheduling import SERVER_GROUPS, check_server_groups, scope_of

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
