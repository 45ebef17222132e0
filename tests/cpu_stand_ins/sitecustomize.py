"""The AMX probe's answer for the CPU suites: yes, so `--attention-backend intel_amx` is kept.

SGLang switches `intel_amx` to `torch_native` when `get_platform().has_amx` is false
(`sglang/srt/arg_groups/overrides.py`, `_attention_backend_platform_fallbacks`), and
`torch_native` cannot run a speculative verify step. The probe is true only with AMX
tiles in the CPU and SGLang's kernel library; this machine has neither, and the stand-in
beside this file provides the kernels the backend calls. The answer is given through
SGLang's own override (`runtime_context.override_platform`, "one place to override"),
for the `has_amx` platform fact only: the layers' own `cpu_has_amx_support()` checks stay
false, so norms, activations and linear layers run SGLang's plain torch code.

Python imports this file at start-up in every process that has this folder on its path
(the server and the scheduler and detokenizer processes it spawns). It installs the
override when SGLang's runtime_context module is first imported.

With `HARNESS_CONTRACT_RECORD` set (the harness sets it for DFLASH suites), the same hook
reads, once SGLang's DFLASH worker and draft model modules are imported, what reached the
draft at run time (`contract_record.py`); SGLang's behaviour is not changed.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import os
import sys

_MODULE = "sglang.srt.runtime_context"


def _answer_amx_probe(module):
    module.override_platform(has_amx=True).install()


def _after_import():
    hooks = {_MODULE: _answer_amx_probe}
    if os.environ.get("HARNESS_CONTRACT_RECORD"):
        import contract_record

        hooks[contract_record.WORKER_MODULE] = contract_record.install_worker
        hooks[contract_record.DRAFT_MODULE] = contract_record.install_draft
        hooks[contract_record.CAPTURE_MODULE] = contract_record.install_capture
    return hooks


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


sys.meta_path.insert(0, _AfterImport(_after_import()))
