"""Imports sit at the top of their module (issue 37, item 7): an import inside a function
hides a module's dependencies from its reader and from tests/layout/test_imports.py's
map. The exceptions are listed below, each with its reason, and the list stays true: an
entry that no longer matches an import fails (`test_every_allowed_import_is_still_there`).

Reasons an import stays inside its function:
- heavy for start-up: a heavy library (tests/test_cli_startup.py's HEAVY) loaded only
  where it is used, so `harness --help`, `harness list` and the modules commands import
  stay fast, or a light package stays light (a test pins most of them);
- runs inside an engine's own environment: a file launched by path in the engine's
  Python, standard library only at its top;
- behaviour: the import itself must happen late (a library reads its settings when
  first imported).

A command's work (`harness/commands/NAME.py`, its imports at the top) is imported by name
when the command runs (`Command.work`, harness/commands/__init__.py): its parser
(`harness/commands/parsers/`) is what `harness --help` loads.

Work left (PENDING): the packages other work is changing now keep their function-level
imports until it lands; each gets this treatment, then leaves the set.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "harness"
# held to the same rule: the CPU reference engine, a package beside the harness
PACKAGES = (PACKAGE, PACKAGE.parent / "reference_engine")

RICH = "heavy for start-up: the command module must import fast; rich only when a table prints"
NUMPY = ("heavy for start-up: the statistics modules import cheaply (the commands import "
         "them); numpy only when a figure is computed (docs/statistics.md)")
SCIPY = ("heavy for start-up: scipy only when a figure needs it (tests/metrics/"
         "test_quantiles_bootstrap_and_lazy_scipy.py)")
LIGHT_AUDIT = ("heavy for start-up: `import harness.audit` stays light, its names load on use "
               "(_LAZY; tests/audit/test_version_sources.py)")
PLUGIN = ("heavy for start-up: the pytest plugin loads in every pytest session and stays "
          "free of pydantic (tests/ci/test_pytest_plugin.py::test_plugin_import_is_light)")
ENGINE_ENV = ("runs inside an engine's own environment (launched by path): standard library "
              "at its top, the engine's transformers imported where it is used")
SUITE_MODEL = ("heavy for start-up: `harness list` reads each suite's cached listing; the suite "
               "model (pydantic) loads only when a listing is stale")
ENGINE_WORKER = ("runs inside an engine's own environment (`python -m reference_engine`)"
                 ": torch, dflash and transformers (and decoding.py, torch at its "
                 "top) load where a worker decodes or a tokenizer is read, so the launcher "
                 "checks its arguments, device and folders without them (exit 2 at once)")
PLOTS = ("heavy for start-up: the run path stays free of matplotlib and pandas; the plot "
         "module loads only when a run's figure is drawn (a failed plot never fails a run)")
RECORD_MODEL = ("heavy for start-up: the loader reads an indexed history without the record "
                "model (pydantic), parsed only where a record is read")

# module -> imported module (or a package above it) -> why it is imported in a function
ALLOWED: dict[str, dict[str, str]] = {
    "harness.audit": {"harness.audit.config": LIGHT_AUDIT, "harness.audit.evaluate": LIGHT_AUDIT,
                      "harness.audit.source": LIGHT_AUDIT},
    "harness.audit.clause_table": {"rich": RICH},
    "harness.audit.config": {"huggingface_hub": "heavy for start-up: slow to import, only a "
                             "hub id needs it (harness.audit stays light)"},
    "harness.audit.corpus": {"rich": RICH},
    "harness.audit.report": {"rich": RICH},
    "harness.audit.table": {"rich": RICH},
    "harness.audit.vllm_worker": {"transformers": ENGINE_ENV},
    "harness.audit.worker": {"transformers": ENGINE_ENV},
    "harness.ci.pytest_plugin": {"harness.suite.model": PLUGIN, "harness.ci.gpu_allocator": PLUGIN,
                                 "harness.run.preflight": PLUGIN,
                                 "harness.protocols.pairing": PLUGIN},
    "reference_engine.loading": {"torch": ENGINE_WORKER, "transformers": ENGINE_WORKER,
                                          "dflash": ENGINE_WORKER,
                                          "reference_engine.decoding": ENGINE_WORKER},
    "reference_engine.seed_train": {
        "transformers": ("runs inside an engine's own environment (seed training, torch at "
                         "its top): gemma-4's classes are imported only for the gemma-4 "
                         "pair, so the Muse Glimmer pair trains under a transformers "
                         "without them")},
    "harness.engines.vllm.recorder.vllm_record": {
        "torch": "loaded at start-up of every process on the vLLM server's path (its "
                 "sitecustomize); torch only once the target is loaded, to match captures",
        "vllm": "loaded at start-up of every process on the vLLM server's path, before vLLM "
                "is: its forward context is read only inside a draft forward"},
    "harness.engines.sglang.parser_probe": {
        "sglang": ("runs inside an engine's own environment (launched by path, SGLang's "
                   "interpreter): standard library at its top; SGLang imported in `main`, so "
                   "a release that does not import is an answer, not a traceback")},
    "harness.metrics.drift": {"numpy": NUMPY},  # the judge imports it (Evidence.drift)
    "harness.metrics.spending": {"numpy": NUMPY, "scipy": SCIPY},
    "harness.metrics.stats": {"numpy": NUMPY, "scipy": SCIPY},
    "harness.metrics.stopping": {"numpy": NUMPY},
    "harness.results.readers": {"pydantic": RECORD_MODEL, "harness.results.record": RECORD_MODEL,
                                "harness.results.soaks": RECORD_MODEL,
                                "harness.results.forced": RECORD_MODEL},
    "harness.run.recorded": {"harness.analysis": PLOTS},
    "harness.run.sequential": {"numpy": NUMPY},  # `harness power` imports it (MIN_GROUP)
    "harness.suite.listing": {"harness.suite.model": SUITE_MODEL},
    "harness.workloads.data": {"datasets": "behaviour: `datasets` reads the offline variables "
                               "set just before its first import; only when no local copy "
                               "exists (heavy)"},
}

# Work left: not yet moved (other work edits these now), prefixes of module names. None
# now: every package is held to the rule.
PENDING: tuple[str, ...] = ()


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_in_functions(source: str, package: str) -> list[tuple[int, str]]:
    """(line, imported module) of each import inside a function of `source`; relative
    imports resolved against `package`."""
    found: list[tuple[int, str]] = []

    def visit(node: ast.AST, inside: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if inside and isinstance(child, ast.Import):
                found.extend((child.lineno, alias.name) for alias in child.names)
            elif inside and isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    parent = package.split(".")[:len(package.split(".")) - child.level + 1]
                    base = ".".join(parent + ([base] if base else []))
                found.append((child.lineno, base))
            visit(child, inside or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef))

    visit(ast.parse(source), False)
    return found


def _under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def scan() -> dict[str, list[tuple[int, str]]]:
    found = {}
    for path in sorted(path for package in PACKAGES for path in package.rglob("*.py")):
        name = module_name(path)
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        if hits := imports_in_functions(path.read_text(encoding="utf-8"), package):
            found[name] = hits
    return found


def test_imports_sit_at_the_top() -> None:
    wrong = [f"{module}:{line}: import {imported}"
             for module, hits in scan().items()
             if not any(_under(module, prefix) for prefix in PENDING)
             for line, imported in hits
             if not any(_under(imported, key) for key in ALLOWED.get(module, {}))]
    assert wrong == [], ("imports inside functions (move them to the module's top, or list "
                         "them in ALLOWED with the reason):\n" + "\n".join(wrong))


def test_every_allowed_import_is_still_there() -> None:
    found = scan()
    stale = [f"{module}: {key}" for module, keys in ALLOWED.items() for key in keys
             if not any(_under(imported, key) for _, imported in found.get(module, []))]
    assert stale == [], "ALLOWED entries no import needs any more:\n" + "\n".join(stale)


def test_allowed_and_pending_name_real_modules_apart() -> None:
    modules = {module_name(path) for package in PACKAGES for path in package.rglob("*.py")}
    assert all(module in modules for module in ALLOWED)
    assert all(any(_under(m, prefix) for m in modules) for prefix in PENDING)
    assert not [m for m in ALLOWED if any(_under(m, prefix) for prefix in PENDING)]


@pytest.mark.parametrize(("source", "found"), [
    ("import os\ndef f():\n    import json\n", [(3, "json")]),
    ("def f():\n    def g():\n        from . import x\n", [(3, "harness.a")]),
    ("class C:\n    async def m(self):\n        from ..b import y\n", [(3, "harness.b")]),
    ("import os\nif os:\n    import json\n", []),
])
def test_the_scan_finds_imports_in_functions(source: str, found: list[tuple[int, str]]) -> None:
    assert imports_in_functions(source, "harness.a") == found
