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

import os
import runpy

_MODULE = "sglang.srt.runtime_context"
# the hook every start-up file of an engine environment uses (harness/engines), run by path
AFTER_IMPORT = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "harness", "engines", "after_import.py")


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


runpy.run_path(AFTER_IMPORT)["install"](_after_import())
