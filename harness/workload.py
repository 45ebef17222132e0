"""The GSM8K workload under its old import path (`harness.workloads.gsm8k` is the module).

Kept so code written against `harness.workload` (tests of the reference engine,
benchmarks) keeps working; new code imports from `harness.workloads`.
"""

from harness.workloads.gsm8k import (
    DATA_ENV,
    HF_DATASET,
    STOP_STRINGS,
    GSM8KData,
    Question,
    build_prompts,
    default_data_paths,
    extract_answer,
    extract_label,
    few_shot_prefix,
    is_correct,
    load_gsm8k,
)
from harness.workloads.items import Prompt, warmup_prompts

__all__ = [
    "DATA_ENV", "HF_DATASET", "STOP_STRINGS", "GSM8KData", "Prompt", "Question",
    "build_prompts", "default_data_paths", "extract_answer", "extract_label",
    "few_shot_prefix", "is_correct", "load_gsm8k", "warmup_prompts",
]
