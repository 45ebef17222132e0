"""A hook run on a module right after its own code ran: what the start-up files in an
engine's own environment use to read (or, for the CPU stand-ins, answer) the engine's
objects without changing its code.

Run by path (`runpy.run_path`), standard library only, by each `sitecustomize` the harness
puts on an engine server's PYTHONPATH: the vLLM recorder (`harness/engines/vllm/recorder`)
and the SGLang CPU stand-ins (`tests/cpu_stand_ins`). `install(hooks)` puts one finder first
on `sys.meta_path`; the first import of each named module runs its hook once.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys
from collections.abc import Callable, Mapping, Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType

Hook = Callable[[ModuleType], None]


class AfterImport(importlib.abc.MetaPathFinder):
    """Runs a hook on a module right after its own code ran, the first time it is
    imported."""

    def __init__(self, hooks: Mapping[str, Hook]) -> None:
        self.hooks = dict(hooks)

    def find_spec(self, name: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        if name not in self.hooks:
            return None
        hook = self.hooks.pop(name)
        sys.meta_path.remove(self)  # the real spec, found without this finder
        try:
            spec = importlib.util.find_spec(name)
        finally:
            if self.hooks:
                sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return spec
        original = spec.loader.exec_module

        def exec_module(module: ModuleType) -> None:
            original(module)
            hook(module)

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]  # the hook
        return spec


def install(hooks: Mapping[str, Hook]) -> None:
    """`hooks`: module name -> function called with the module once its code ran."""
    if hooks:
        sys.meta_path.insert(0, AfterImport(hooks))
