"""Golden launch lines of the target alone ([speedup]): each engine's speculative line less
its speculative flags, everything else (the build's serving flags, extra_args) as it was.

Flag names as in tests/engines/test_golden_launch_lines.py: SGLang 0.5.23 turns
speculation on only with `--speculative-*` flags (`sglang/srt/arg_groups/fields/spec.py`);
vLLM 0.32.0 with `--speculative-config` (and the per-request spec metrics only report it).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.engines import reference_adapter as reference_launch
from harness.engines import sglang
from harness.engines.flags import without_flags
from harness.engines.registry import adapter_for
from harness.suite.checkpoints import Models
from harness.suite.model import load_suite
from tests.engines.test_golden_launch_lines import GOLDEN, REFERENCE_GOLDEN, reference_line


def _less_speculative(line: list[str]) -> list[str]:
    """A golden speculative line with each `--speculative-*` flag and its value taken out
    (in the SGLang golden lines every speculative flag takes a value)."""
    return [arg for i, arg in enumerate(line)
            if not arg.startswith("--speculative") and not line[i - 1].startswith("--speculative")]


# The GPU suites' golden lines less their speculative flags: gemma keeps the build's serving
# flags (--trust-remote-code ... --skip-server-warmup), qwen its own, in order.
GOLDEN_SGLANG = {name: _less_speculative(GOLDEN[name])
                 for name in ("gemma4_dflash_31b", "qwen3_8b_dflash")}

GOLDEN_VLLM = [
    "/env/bin/vllm", "serve", "/m/target",
    "--tensor-parallel-size", "1",
    "--seed", "0",
    "--host", "127.0.0.1",
    "--port", "8123",
]


@pytest.mark.parametrize("name", sorted(GOLDEN_SGLANG))
def test_sglang_target_alone_drops_every_speculative_flag(name: str) -> None:
    suite = load_suite(name).suite
    line = sglang.launch_command(suite, "python", "127.0.0.1", 30000)
    assert "--speculative-algorithm" in line  # the speculative line has them
    alone = adapter_for("sglang").target_alone_command(line)
    assert alone == GOLDEN_SGLANG[name]
    assert not any(arg.startswith("--speculative") for arg in alone)


def test_vllm_target_alone_drops_the_speculative_config() -> None:
    suite = load_suite("tiny_dflash_vllm_cpu").suite
    adapter = adapter_for("vllm")
    line = adapter.launch_command(suite, "/env/bin/python", "127.0.0.1", 8123,
                                  Models("/m/target", "/m/draft"))
    alone = adapter.target_alone_command(line)
    # the suite's extra_args (the build's serving) stay, in order, after the harness's own
    tail = ["--max-model-len", "512", "--dtype", "float32", "--max-num-seqs", "4",
            "--enforce-eager"]
    assert line[-len(tail):] == tail
    assert alone[:len(GOLDEN_VLLM)] == GOLDEN_VLLM
    assert alone[len(GOLDEN_VLLM):] == [arg for arg in line[line.index("--port") + 2:]]
    assert "--speculative-config" not in alone
    assert "--per-request-spec-decode-metrics" not in alone


def test_reference_target_alone_runs_without_speculation(tmp_path: Path) -> None:
    line = reference_line(tmp_path)
    assert line == REFERENCE_GOLDEN
    block_size = line.index("--block-size")  # its one speculative flag, with its value
    assert adapter_for("reference").target_alone_command(line) == [
        *REFERENCE_GOLDEN[:block_size], *REFERENCE_GOLDEN[block_size + 2:], "--no-speculation"]


def test_the_reference_engine_refuses_no_speculation_with_a_block_size() -> None:
    from reference_engine.__main__ import parse_args

    args = parse_args(["--target", "t", "--draft", "d", "--port", "1", "--no-speculation"])
    assert args.block_size == 1
    with pytest.raises(SystemExit):
        parse_args(["--target", "t", "--draft", "d", "--port", "1", "--no-speculation",
                    "--block-size", "8"])


def test_no_speculation_is_a_flag_the_suite_cannot_set(tmp_path: Path) -> None:
    from harness.errors import BadInput
    from harness.suite.model import parse_suite

    suite, _ = parse_suite('name = "r"\n[engine]\nkind = "reference"\n'
                           'extra_args = ["--no-speculation"]\n[topology]\ngpus = 0\n'
                           "[floors]\naccept_length = 2\n", "r.toml")
    with pytest.raises(BadInput, match="--no-speculation"):
        reference_launch.check_flags(suite)


@given(st.lists(st.sampled_from(["--a", "1", "--b=2", "--drop", "x", "--drop=y", "--c"]),
                max_size=12))
def test_without_flags_keeps_every_other_argument_in_order(line: list[str]) -> None:
    kept = without_flags(line, ["--drop"])
    assert not any(arg.split("=", 1)[0] == "--drop" for arg in kept)
    others = iter(line)
    assert all(any(arg == other for other in others) for arg in kept)  # a subsequence


def test_answers_of_the_target_alone_are_read_without_spec_counts() -> None:
    from harness.errors import MissingMetric

    sglang_answer = {"text": "x", "meta_info": {"completion_tokens": 12, "prompt_tokens": 5,
                                                "finish_reason": {"type": "length"}}}
    with pytest.raises(MissingMetric, match="verify count"):  # as a speculative answer
        adapter_for("sglang").parse_generate(sglang_answer, "/generate")
    parsed = adapter_for("sglang").parse_target_alone(sglang_answer, "/generate", chat=False)
    assert (parsed.completion_tokens, parsed.verify_steps, parsed.correct_drafts) == (12, 0, None)
    vllm_answer = {"choices": [{"text": "x", "finish_reason": "length"}],
                   "usage": {"completion_tokens": 7, "prompt_tokens": 3}}
    with pytest.raises(MissingMetric, match="speculative_decoding"):
        adapter_for("vllm").parse_generate(vllm_answer, "/v1/completions")
    parsed = adapter_for("vllm").parse_target_alone(vllm_answer, "/v1/completions", chat=False)
    assert (parsed.completion_tokens, parsed.verify_steps) == (7, 0)


def test_a_server_running_speculation_is_no_target_alone() -> None:
    assert adapter_for("sglang").target_alone_mismatches({"speculative_algorithm": "DFLASH"})
    assert adapter_for("sglang").target_alone_mismatches({"speculative_algorithm": None}) == []
    spec = {"server_info": {"vllm_config": {"speculative_config": {"method": "dflash"}}}}
    assert adapter_for("vllm").target_alone_mismatches(spec)
    assert adapter_for("vllm").target_alone_mismatches({"server_info": {"vllm_config": {
        "speculative_config": None}}}) == []
