"""Start-up hook of vLLM's server processes when the harness records what reached the draft.

The harness puts this folder first on the vLLM server's PYTHONPATH for DFLASH suites
(harness/run/runner.py); Python imports this file at start-up in every process with it
on its path (the API server and the EngineCore child it spawns inherit the environment).
It first runs any other `sitecustomize` on the path (the environment's own), then, only
when `HARNESS_CONTRACT_RECORD` or `HARNESS_ATTENTION_RECORD` names a file, hooks vLLM's
modules once they are imported (vllm_record.py). vLLM's behaviour is not changed: its own
objects are read after its own code ran.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
_ENV = ("HARNESS_CONTRACT_RECORD", "HARNESS_ATTENTION_RECORD")


def _chain() -> None:
    """Run the next `sitecustomize` on the path, as if this one were not there."""
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None or spec.origin == os.path.abspath(__file__):
        return
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)


class _AfterImport(importlib.abc.MetaPathFinder):
    """Runs a hook on a module right after its own code ran, the first time it is
    imported."""

    def __init__(self, hooks):
        self.hooks = hooks

    def find_spec(self, name, path=None, target=None):
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

        def exec_module(module):
            original(module)
            hook(module)

        spec.loader.exec_module = exec_module
        return spec


_chain()
if any(os.environ.get(name) for name in _ENV):
    if _HERE not in sys.path:
        sys.path.append(_HERE)
    import vllm_record

    sys.meta_path.insert(0, _AfterImport(vllm_record.hooks()))
