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

import importlib.machinery
import importlib.util
import os
import runpy
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
_ENV = ("HARNESS_CONTRACT_RECORD", "HARNESS_ATTENTION_RECORD")
# the hook every start-up file of an engine environment uses, run by path (only this
# folder is on the path)
AFTER_IMPORT = os.path.join(os.path.dirname(os.path.dirname(_HERE)), "after_import.py")


def _chain() -> None:
    """Run the next `sitecustomize` on the path, as if this one were not there."""
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None or spec.origin == os.path.abspath(__file__):
        return
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)


_chain()
if any(os.environ.get(name) for name in _ENV):
    if _HERE not in sys.path:
        sys.path.append(_HERE)
    import vllm_record

    runpy.run_path(AFTER_IMPORT)["install"](vllm_record.hooks())
