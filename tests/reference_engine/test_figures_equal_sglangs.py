"""The engine's figures equal what SGLang 0.5.23's own code computes from the same steps.

SGLang's functions are taken from the 0.5.23 wheel ($HARNESS_SGLANG_WHEELS) with `ast` and
run on plain stand-ins, never copied into the project:
- `TokenizerManager._calculate_spec_decoding_metrics` (every spec key of meta_info);
- `Req.update_spec_correct_drafts_histogram` (the histogram, step by step);
- `GenerationBatchResult.get_num_generated_tokens` and `MetricsReporter.update_spec_metrics`
  (what one verify step adds to the server-wide average), then SGLang's ratio.
Torch-free: the engine's side is `params.meta_info` and `engine.Counters`.
"""

from __future__ import annotations

import ast
import os
import random
import zipfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from reference_engine.engine import Counters
from reference_engine.params import meta_info

VERSION = "0.5.23"
BLOCK = 8


def wheel() -> Path:
    folder = os.environ.get("HARNESS_SGLANG_WHEELS")
    found = sorted(Path(folder).glob(f"sglang-{VERSION}-*.whl")) if folder else []
    if not found:
        pytest.skip(f"no sglang {VERSION} wheel in $HARNESS_SGLANG_WHEELS")
    return found[0]


def method(path: str, cls: str, name: str, namespace: dict[str, Any]):
    """One method of a class in the wheel, compiled alone, annotations dropped."""
    with zipfile.ZipFile(wheel()) as archive:
        tree = ast.parse(archive.read(path).decode())
    klass = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls)
    func = next(n for n in klass.body if isinstance(n, ast.FunctionDef) and n.name == name)
    func.decorator_list, func.returns = [], None
    for arg in [*func.args.args, *func.args.kwonlyargs]:
        arg.annotation = None
    module = ast.Module(body=[func], type_ignores=[])
    exec(compile(ast.fix_missing_locations(module), f"{path}:{name}", "exec"), namespace)
    return namespace[name]


@pytest.fixture(scope="module")
def sglang() -> SimpleNamespace:
    spec = SimpleNamespace(speculative_num_draft_tokens=BLOCK)
    return SimpleNamespace(
        spec_metrics=method("sglang/srt/managers/tokenizer_manager.py", "TokenizerManager",
                            "_calculate_spec_decoding_metrics",
                            {"get_spec": lambda: spec, "_ragged_verify_cap_accept": lambda: False}),
        histogram=method("sglang/srt/managers/schedule_batch.py", "Req",
                         "update_spec_correct_drafts_histogram", {}),
        generated=method("sglang/srt/managers/utils.py", "GenerationBatchResult",
                         "get_num_generated_tokens", {}),
        update=method("sglang/srt/managers/scheduler_components/metrics_reporter.py",
                      "SchedulerMetricsReporter", "update_spec_metrics", {}),
    )


def requests(seed: int, count: int) -> list[dict[str, Any]]:
    """Results as the decoder reports them; the last step of some is cut by a stop or limit."""
    rng = random.Random(seed)
    results = []
    for _ in range(count):
        accepted = [rng.randint(0, BLOCK - 1) for _ in range(rng.randint(1, 12))]
        full = 1 + sum(a + 1 for a in accepted)
        kept = full - rng.randint(0, accepted[-1])  # a cut inside the last step
        results.append({"output_ids": list(range(kept)), "prompt_tokens": 9,
                        "finish_reason": {"type": "stop", "matched": "Question"},
                        "accepted_drafts": accepted})
    return results


def test_meta_info_equals_sglangs(sglang: SimpleNamespace) -> None:
    for result in requests(1, 50):
        req = SimpleNamespace(spec_correct_drafts_histogram=[])
        for accepted in result["accepted_drafts"]:
            sglang.histogram(req, accepted)
        recv = SimpleNamespace(
            spec_verify_ct=[len(result["accepted_drafts"])],
            spec_num_correct_drafts=[sum(result["accepted_drafts"])],
            completion_tokens=[len(result["output_ids"])],
            spec_correct_drafts_histogram=[req.spec_correct_drafts_histogram],
            spec_num_cap_tokens=None, spec_cap_lens_histogram=None)
        expected: dict[str, Any] = {}
        sglang.spec_metrics(None, expected, recv, 0)
        ours = meta_info(result, "r", 0.1, BLOCK)
        spec = {key: value for key, value in ours.items() if key.startswith("spec_")}
        assert spec == expected
        assert list(spec) == list(expected)  # same keys, same order


def test_server_average_equals_sglangs(sglang: SimpleNamespace) -> None:
    results = requests(2, 40)
    reporter = SimpleNamespace(spec_num_accept_tokens=0, spec_num_correct_drafts=0,
                               spec_num_forward_ct=0, spec_num_block_accept_tokens=0,
                               spec_num_cap_tokens=0)
    counters = Counters()
    for result in results:
        counters.add(result)
        for accepted in result["accepted_drafts"]:  # one decode batch of one request per step
            batch = SimpleNamespace(num_correct_drafts=accepted, num_non_draft_tokens_per_req=1)
            sglang.update(reporter, 1, accepted, num_accept_tokens=sglang.generated(batch, 1))
    assert counters.verify_steps == reporter.spec_num_forward_ct
    assert counters.accept_tokens == reporter.spec_num_accept_tokens
    # The cut in the last step does not reduce SGLang's count: it sits above the kept tokens.
    kept = sum(len(r["output_ids"]) - 1 for r in results)
    assert counters.accept_tokens > kept


def test_no_spec_keys_without_a_verify_step(sglang: SimpleNamespace) -> None:
    result = {"output_ids": [5], "prompt_tokens": 3, "accepted_drafts": [],
              "finish_reason": {"type": "length", "length": 1}}
    recv = SimpleNamespace(spec_verify_ct=[0], spec_num_correct_drafts=[0],
                           completion_tokens=[1], spec_correct_drafts_histogram=[[]])
    expected: dict[str, Any] = {}
    sglang.spec_metrics(None, expected, recv, 0)
    assert expected == {}
    assert not any(key.startswith("spec_") for key in meta_info(result, "r", 0.1, BLOCK))
