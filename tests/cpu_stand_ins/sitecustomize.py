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
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys

_MODULE = "sglang.srt.runtime_context"


class _AnswerAmxProbe(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name != _MODULE:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        original = spec.loader.exec_module

        def exec_module(module):
            original(module)
            module.override_platform(has_amx=True).install()

        spec.loader.exec_module = exec_module
        return spec


sys.meta_path.insert(0, _AnswerAmxProbe())
