"""Typed seams (issue 37, item 7): no `Any` between stages.

The pipeline hands typed things from stage to stage: the suite model (`harness.suite`), the
run record and its rows (`harness.results.record`, `rows`), the figures (`harness.metrics`).
A module of the packages below that another package imports is a seam, and its public
signatures (a public function's parameters and return, a public class's public methods and
its fields: dataclass, pydantic model, TypedDict) name the real type, never `Any`.

Where no single type is true, the seam says so without `Any`: a JSON document read from disk
before it is validated is `object` (or the `JSON` alias, `harness.results.rows`), a value
passed through untouched is `object`, a request row the metrics read is
`definitions.RequestLike` (the loader's `RequestRow`, or a dict of its fields). An `Any`
that must stay goes in ALLOWED with its reason, and the list stays true
(`test_every_allowed_any_is_still_there`). harness/engines is held to it: the adapter
protocol (`engines/interface.py`) takes the suite model and answers `ParsedResponse`, a
server's reply or `/server_info` is `object` until the adapter has read it, a request body is
`dict[str, object]`, vLLM's layer audit answers TypedDicts.

harness/run is a pipeline of its own (plan, preflight, launch, drive, measure, judge, record):
its modules are seams to each other too (STAGES), so a stage hands the next one the engine
it prepared (`plan.PreparedEngine`, or `plan.ServedEngine` where an attached server's will
do), the GPUs and their fit (`results.record.GPUInfo`, `preflight.Fit`), the run's options
(`outcome.RunOptions`), the driver's workload (`suite.entries.Workload`).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.layout.test_imports import graph

PACKAGE = Path(__file__).resolve().parents[2] / "harness"

# The packages held to it.
CHECKED: tuple[str, ...] = ("suite", "commands", "results", "analysis", "metrics", "publish",
                            "workloads", "protocols", "ci", "engines", "run", "audit", "builds",
                            "secrets", "speculation", "reference_engine")

# Packages whose modules are stages handing typed things to each other: a module another
# module of the same package imports is a seam too.
STAGES: tuple[str, ...] = ("run", "protocols")

# Modules not held to it yet (issue 37, item 7): none now.
PENDING: tuple[str, ...] = ()

# "module.Name" or "module.Class.name" (a method or a field) -> why `Any` stays there.
ALLOWED: dict[str, str] = {
    "harness.protocols.calibrate.CalibrationDocument":
        "a calibration record's JSON as its file holds it: written by `calibrate`, read back "
        "by `read_calibration`, which checks the fields `show` and the gate print",
}


def folder_of(module: str) -> str:
    parts = module.split(".")
    if parts[0] != "harness":
        return parts[0]  # reference_engine: the harness imports its checkpoint lookup
    return parts[1] if len(parts) > 1 else ""


def seams() -> dict[str, set[str]]:
    """Each module of CHECKED that another package imports (or, in STAGES, another module
    of its own package) -> the packages importing it."""
    found: dict[str, set[str]] = {}
    for module, imported in graph().items():
        for target in imported:
            folder = folder_of(target)
            if target in PENDING or folder not in CHECKED:
                continue
            if folder != folder_of(module) or folder in STAGES:
                found.setdefault(target, set()).add(folder_of(module) or module)
    return found


def _names_any(annotation: ast.expr | None) -> bool:
    if annotation is None:
        return False
    for node in ast.walk(annotation):
        if isinstance(node, ast.Name) and node.id == "Any":
            return True
        if isinstance(node, ast.Attribute) and node.attr == "Any":
            return True
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            try:
                if _names_any(ast.parse(node.value, mode="eval").body):
                    return True
            except SyntaxError:
                continue
    return False


def _public(name: str) -> bool:
    return not name.startswith("_") or (name.startswith("__") and name.endswith("__"))


def _signature_anys(function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    arguments = function.args
    every = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs,
             *([arguments.vararg] if arguments.vararg else []),
             *([arguments.kwarg] if arguments.kwarg else [])]
    found = [argument.arg for argument in every if _names_any(argument.annotation)]
    if _names_any(function.returns):
        found.append("return")
    return found


def anys_in(source: str) -> list[tuple[int, str, str]]:
    """(line, public name, where) of each `Any` in a public signature of `source`: the
    top-level functions, and the public classes' public methods and annotated fields."""
    found: list[tuple[int, str, str]] = []
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and _public(node.name):
            found += [(node.lineno, node.name, where) for where in _signature_anys(node)]
        elif isinstance(node, ast.ClassDef) and _public(node.name):
            for item in node.body:
                if (isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
                        and _public(item.name)):
                    found += [(item.lineno, f"{node.name}.{item.name}", where)
                              for where in _signature_anys(item)]
                elif (isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)
                      and _public(item.target.id) and _names_any(item.annotation)):
                    found.append((item.lineno, f"{node.name}.{item.target.id}", "field"))
        elif (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
              and _public(node.target.id) and _names_any(node.value)
              and isinstance(node.annotation, ast.Name) and node.annotation.id == "TypeAlias"):
            found.append((node.lineno, node.target.id, "alias"))
    return found


def _path(module: str) -> Path:
    relative = Path(*module.split("."))
    package = PACKAGE.parent / relative / "__init__.py"
    return package if package.is_file() else (PACKAGE.parent / relative).with_suffix(".py")


def scan() -> dict[str, list[tuple[int, str, str]]]:
    return {module: hits for module in sorted(seams())
            if (hits := anys_in(_path(module).read_text(encoding="utf-8")))}


def test_no_any_at_a_seam() -> None:
    wrong = [f"{module}:{line}: {name} ({where})"
             for module, hits in scan().items() for line, name, where in hits
             if f"{module}.{name}" not in ALLOWED]
    assert wrong == [], ("`Any` in a public signature of a module another package imports "
                         "(name the real type, `object`, or a JSON alias; or list it in "
                         "ALLOWED with the reason):\n" + "\n".join(wrong))


def test_every_allowed_any_is_still_there() -> None:
    present = {f"{module}.{name}" for module, hits in scan().items() for _, name, _ in hits}
    assert sorted(set(ALLOWED) - present) == []


def test_the_seams_are_found() -> None:
    found = seams()
    assert "commands" in found["harness.results.readers"]  # every command reads records
    assert "harness.suite.model" in found and "harness.commands.parsers.run" not in found
    assert "run" in found["harness.engines.interface"]  # the adapter protocol is a seam
    assert "run" in found["harness.run.measuring"]  # the runner measures: a stage's seam
    assert "harness.metrics.breakdown" in found
    assert "run" in found["harness.run.drive"]  # measuring and the target alone drive a server


def test_pending_names_real_modules() -> None:
    modules = set(graph())
    assert [m for m in PENDING if m not in modules] == []


@pytest.mark.parametrize(("source", "found"), [
    ("def f(x: Any) -> int: ...", [(1, "f", "x")]),
    ("def f(x: dict[str, 'Any']) -> typing.Any: ...", [(1, "f", "x"), (1, "f", "return")]),
    ("def _f(x: Any): ...\nclass _C:\n    x: Any", []),
    ("class C:\n    x: Any\n    _y: Any\n    def m(self, *a: Any) -> None: ...",
     [(2, "C.x", "field"), (4, "C.m", "a")]),
    ("Row: TypeAlias = dict[str, Any]\nJSON = object", [(1, "Row", "alias")]),
    ("def f(x: object, y: JSON) -> None: ...", []),
])
def test_the_scan_finds_any(source: str, found: list[tuple[int, str, str]]) -> None:
    assert anys_in(source) == found
