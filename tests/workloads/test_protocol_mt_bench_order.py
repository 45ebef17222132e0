"""The MT-Bench prompts of vLLM's reference-acceptance protocol, in the order the harness
sends them: Spec-Bench's first 80 rows are FastChat's MT-Bench questions, ids 81-160 in
FastChat's own file order (lm-sys/FastChat fastchat/llm_judge/data/mt_bench/question.jsonl
at 589532dc: ten questions per category, writing to humanities), first turns only.
vLLM's test loads HuggingFaceH4/mt_bench_prompts, built from a copy of that file; the copy
is not read here, so its order is not verified (harness/suite/protocols.toml says so)."""

from __future__ import annotations

from harness.files import SUITES_DIR
from harness.suite.entries import MT_BENCH_CATEGORIES
from harness.suite.model import parse_suite
from harness.suite.references import protocols
from harness.workloads import prepare


def test_the_protocols_mt_bench_prompts_are_fastchats_in_its_order() -> None:
    suite, _ = parse_suite((SUITES_DIR / "qwen3_8b_dflash_vllm.toml").read_text(),
                           "suites/qwen3_8b_dflash_vllm.toml")
    [entry] = [e for e in suite.workloads if e.name == "mt-bench"]
    assert entry.reproduces is not None and entry.reproduces.dataset == "mt-bench"
    assert protocols()[entry.reproduces.protocol].dataset("mt-bench") is not None
    prompts = prepare(entry).prompts
    assert [p.question_id for p in prompts] == [str(i) for i in range(81, 161)]
    # FastChat's blocks of ten, in its category order (MT_BENCH_CATEGORIES)
    assert [p.subcategory for p in prompts[::10]] == list(MT_BENCH_CATEGORIES)
    assert all(not p.later_turns for p in prompts)  # first turns only
    assert prompts[0].text.startswith("Compose an engaging travel blog post about a recent "
                                      "trip to Hawaii")
