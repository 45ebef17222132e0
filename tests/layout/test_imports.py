"""The package's shape: at most six files at the top of `harness/`, no import circle among
its files (imports inside functions included: they are circles in the design even when
they run), and dependencies in one direction (the folders' map in the README).

The CPU reference engine (`reference_engine/`, a package beside `harness/`) sits in the
engines' row: it reads the rows above it (errors, files, builds, the attention contract,
the forced-acceptance knob's type), and only the stages below it import its torch-free
checkpoint lookup; the harness starts the engine itself as a process."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "harness"
REFERENCE_ENGINE = PACKAGE.parent / "reference_engine"
PACKAGES = (PACKAGE, REFERENCE_ENGINE)

# The README's map, top to bottom: a module imports only from its own row or rows above it
# (imports inside functions count). `harness` is the package's __init__ (`__version__`).
ROWS: tuple[tuple[str, ...], ...] = (
    ("harness", "errors", "engine_kinds", "secrets", "files", "speculation"),
    ("results",),
    ("suite",),
    ("metrics",),
    ("workloads",),
    ("builds", "engines", "audit", "reference_engine"),
    ("analysis",),
    ("run",),
    ("protocols", "ci"),
    ("publish",),
    ("commands",),
    ("cli", "__main__"),
)
ROW_OF = {folder: row for row, folders in enumerate(ROWS) for folder in folders}
TOP_LEVEL = {package.name for package in PACKAGES}


def module_files() -> dict[str, Path]:
    modules = {}
    for path in (path for package in PACKAGES for path in package.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The harness and reference-engine modules `name` imports anywhere in its file
    (submodules resolved)."""

    def known(dotted: str) -> str | None:
        while dotted and dotted not in modules:
            dotted = dotted.rpartition(".")[0]
        return dotted or None

    found: set[str] = set()
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[:len(package) - node.level + 1] + ([base] if base else []))
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                       for alias in node.names]
        else:
            continue
        for target in targets:
            if target.split(".")[0] in TOP_LEVEL and (hit := known(target)) and hit != name:
                found.add(hit)
    return found


@functools.cache  # read once for every folder's case: each parse of the package took 2 s
def graph() -> dict[str, set[str]]:
    modules = module_files()
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def folder_of(module: str) -> str:
    parts = module.split(".")
    if parts[0] != "harness":
        return parts[0]  # reference_engine: one folder of the map
    return parts[1] if len(parts) > 1 else "harness"


def test_at_most_six_files_at_the_top() -> None:
    top = sorted(path.name for path in PACKAGE.glob("*.py"))
    assert len(top) <= 6, top


def test_no_import_circle() -> None:
    assert circles(graph()) == []


def test_circle_finder_finds_a_circle() -> None:
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_every_folder_has_a_row() -> None:
    assert {folder_of(module) for module in module_files()} <= set(ROW_OF)


@pytest.mark.parametrize("folder", sorted(ROW_OF))
def test_dependencies_point_one_way(folder: str) -> None:
    wrong = sorted(
        f"{module} -> {target}"
        for module, targets in graph().items() if folder_of(module) == folder
        for target in targets if ROW_OF[folder_of(target)] > ROW_OF[folder])
    assert wrong == []


def test_every_module_imports() -> None:
    """A name moved without its importers fails here, not in the one e2e test that reaches
    it (all of them in one fresh interpreter)."""
    import subprocess
    import sys

    names = sorted(name for name in module_files() if not name.endswith("__main__"))
    script = ("import importlib, sys\nfailed = []\nfor name in sys.argv[1:]:\n"
              "    try:\n        importlib.import_module(name)\n"
              "    except Exception as error:\n        failed.append(f'{name}: {error!r}')\n"
              "print('\\n'.join(failed))\n")
    done = subprocess.run([sys.executable, "-c", script, *names], capture_output=True,
                          text=True, timeout=300, cwd=PACKAGE.parent, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == ""
