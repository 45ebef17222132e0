"""The environment every nox session's processes start with (the noxfile's top level):
OpenMP pools that sleep while they wait, so that engines run side by side in `.ci/run` do
not spin on each other's cores, and bytecode kept; a host's own setting stands."""

from __future__ import annotations

import ast
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[1]


def _session_environment(host: dict[str, str]) -> dict[str, str]:
    """The noxfile's top-level `os.environ` statements, run on a copy of `host`."""
    tree = ast.parse((ROOT / "noxfile.py").read_text())
    statements = [node for node in tree.body if isinstance(node, ast.Expr)
                  and "os.environ" in ast.unparse(node)]
    assert statements, "the noxfile sets no environment at its top level"
    environ = dict(host)
    namespace = {"os": SimpleNamespace(environ=environ), "ROOT": ROOT}
    exec(compile(ast.Module(body=statements, type_ignores=[]), "noxfile.py", "exec"), namespace)
    return environ


def test_openmp_pools_wait_passively_unless_the_host_says_otherwise() -> None:
    assert _session_environment({})["OMP_WAIT_POLICY"] == "PASSIVE"
    assert _session_environment({"OMP_WAIT_POLICY": "ACTIVE"})["OMP_WAIT_POLICY"] == "ACTIVE"


def test_bytecode_is_kept_under_the_repositorys_cache() -> None:
    environment = _session_environment({"PYTHONDONTWRITEBYTECODE": "1"})
    assert "PYTHONDONTWRITEBYTECODE" not in environment
    assert environment["PYTHONPYCACHEPREFIX"] == str(ROOT / ".cache" / "pycache")
