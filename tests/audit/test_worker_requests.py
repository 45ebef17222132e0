"""A resolver worker refuses a request that is not what the harness sends (a field missing
or of another type) by naming the field's place, exit 2, before it imports transformers;
the parent's `run_worker` passes those words on."""

from __future__ import annotations

import os
import sys

import pytest

from harness.audit import evaluate, vllm
from harness.audit.envs import run_worker
from harness.audit.errors import AuditLimitError

WORKERS = {"worker": evaluate.WORKER, "vllm_worker": vllm.WORKER}
JOB = {"id": "0", "label": "sglang 0.5.23", "files": {}, "config": 0}
CASES = [
    ("worker", {"configs": [{"dir": "/d"}], "jobs": [{**JOB, "label": None}]},
     "request.jobs[0].label: expected a string, got NoneType"),
    ("worker", {"configs": [{"dir": "/d"}], "jobs": [{k: v for k, v in JOB.items()
                                                       if k != "files"}]},
     "request.jobs[0]: no 'files'"),
    ("worker", {"configs": [{"dir": "/d"}], "jobs": [{**JOB, "config": 1}]},
     "request.jobs[0].config: expected an index into the 1 configs, got 1"),
    ("worker", {"configs": [{"dir": "/d", "target": {"dir": "/t", "tokenizer": "yes"}}],
                "jobs": [JOB]},
     "request.configs[0].target.tokenizer: expected true or false, got str"),
    ("vllm_worker", {"files": {}, "drafts": [{"dir": "/d", "target_layers": "36"}]},
     "request.drafts[0].target_layers: expected an integer or null, got str"),
    ("vllm_worker", {"files": {"a.py": 1}, "drafts": []},
     "request.files['a.py']: expected a string, got int"),
    ("vllm_worker", {"drafts": []}, "request: no 'files'"),
]


@pytest.mark.parametrize(("name", "request_", "said"), CASES)
def test_a_malformed_request_is_refused_naming_the_field(name: str, request_: dict,
                                                         said: str) -> None:
    with pytest.raises(AuditLimitError) as refused:
        run_worker(sys.executable, WORKERS[name], request_, dict(os.environ), 60, name)
    assert str(refused.value).startswith(f"{name} failed (exit 2): ")
    assert str(refused.value).endswith(said)
