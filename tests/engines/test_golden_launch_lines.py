"""Golden launch lines of the shipped SGLang suites and of the CPU reference engine.

Flag names checked against SGLang 0.5.23 (`sglang/srt/arg_groups/fields/*.py`:
`--` + field name with `_` -> `-`): --model-path, --speculative-algorithm,
--speculative-draft-model-path, --speculative-num-draft-tokens,
--speculative-dflash-block-size, --speculative-draft-attention-backend, --tp-size,
--random-seed, --host, --port. The gemma extra args are, in order, those of SGLang's
`test/registered/spec/test_gemma4_dflash_31b_extra.py`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.engines import reference_adapter as reference_launch
from harness.engines import sglang
from harness.errors import BadInput
from harness.suite.model import load_suite, parse_suite
from tests.fixtures.suites_and_host import FULL_SGLANG_SUITE

SGLANG = ["python", "-m", "sglang.launch_server"]
# SGLang's gemma gate, other_args in order (without the helper's --host/--port/--device):
# its speculative flags, then its serving flags, then --tp-size.
GEMMA_SPECULATIVE = [
    "--speculative-algorithm", "DFLASH",
    "--speculative-draft-model-path", "z-lab/gemma-4-31B-it-DFlash",
    "--speculative-num-draft-tokens", "16",
    "--speculative-draft-attention-backend", "flashinfer",
]
GEMMA_SERVING = [
    "--trust-remote-code",
    "--attention-backend", "triton",
    "--dtype", "bfloat16",
    "--mem-fraction-static", "0.55",
    "--max-running-requests", "16",
    "--context-length", "2048",
    "--max-total-tokens", "32768",
    "--skip-server-warmup",
]
SGLANG_GEMMA_OTHER_ARGS = [*GEMMA_SPECULATIVE, *GEMMA_SERVING, "--tp-size", "2"]


def owned(tp_size: str) -> list[str]:
    """The flags the harness sets itself, in its order, between the speculative and the
    suite's own: ranks, seed, and the address it serves on."""
    return ["--tp-size", tp_size, "--random-seed", "0", "--host", "127.0.0.1", "--port", "30000"]


GOLDEN = {
    "gemma4_dflash_31b": [
        *SGLANG, "--model-path", "google/gemma-4-31B-it",
        *GEMMA_SPECULATIVE, *owned("2"), *GEMMA_SERVING,
    ],
    "qwen3_8b_dflash": [
        *SGLANG, "--model-path", "Qwen/Qwen3-8B",
        "--speculative-algorithm", "DFLASH",
        "--speculative-draft-model-path", "z-lab/Qwen3-8B-DFlash-b16",
        "--speculative-num-draft-tokens", "16",
        *owned("1"),
        "--trust-remote-code",
        "--attention-backend", "flashinfer",
        "--page-size", "1",
        "--max-running-requests", "64",
        "--mem-fraction-static", "0.7",
    ],
    "muse_glimmer_dflash_gsm8k": [
        *SGLANG, "--model-path", "/models/muse-glimmer",
        "--speculative-algorithm", "DFLASH",
        "--speculative-draft-model-path", "/models/muse-glimmer-assistant",
        "--speculative-dflash-block-size", "5",
        *owned("1"),
        "--reasoning-parser", "muse",
        "--tool-call-parser", "muse",
        "--language-model-only",
        "--speculative-draft-load-format", "auto",
        "--mem-fraction-static", "0.85",
    ],
}


# Spec-Bench on the same pair, launched exactly as the GSM8K gate's server.
GOLDEN["qwen3_8b_dflash_spec_bench"] = list(GOLDEN["qwen3_8b_dflash"])


# The real SGLang on CPU (docs/sglang-on-cpu.md): NGRAM loads no draft model, so no
# --speculative-draft-model-path; STANDALONE's tiny causal draft comes from the environment.
CPU_FLAGS = [
    "--host", "127.0.0.1", "--port", "30000",
    "--device", "cpu", "--attention-backend", "intel_amx", "--sampling-backend", "pytorch",
    "--grammar-backend", "none", "--mem-fraction-static", "0.4", "--max-total-tokens", "4096",
    "--skip-server-warmup", "--decode-log-interval", "1", "--sleep-on-idle",
]
TINY_TARGET = [*SGLANG, "--model-path", "reference_engine/tiny/target"]
GOLDEN["tiny_ngram_sglang_cpu"] = [
    *TINY_TARGET, "--speculative-algorithm", "NGRAM", "--speculative-num-draft-tokens", "4",
    "--tp-size", "1", "--random-seed", "0", *CPU_FLAGS,
]
# Two DP ranks (docs/topology.md): --dp-size after --tp-size; the rest as the NGRAM suite's
GOLDEN["tiny_ngram_dp2_sglang_cpu"] = [
    *TINY_TARGET, "--speculative-algorithm", "NGRAM", "--speculative-num-draft-tokens", "4",
    "--tp-size", "1", "--dp-size", "2", "--random-seed", "0", *CPU_FLAGS,
]
GOLDEN["tiny_standalone_sglang_cpu"] = [
    *TINY_TARGET, "--speculative-algorithm", "STANDALONE",
    "--speculative-draft-model-path", "/models/tiny-causal-draft",
    "--speculative-num-draft-tokens", "4", "--speculative-num-steps", "3",
    "--speculative-eagle-topk", "1", "--tp-size", "1", "--random-seed", "0", *CPU_FLAGS,
]

# SGLang's DFLASH worker on CPU: the draft's backend from [speculative], the flags its test
# patch needs (bf16, no overlap schedule, no CUDA graphs) among the CPU flags.
GOLDEN["tiny_dflash_sglang_cpu"] = [
    *TINY_TARGET, "--speculative-algorithm", "DFLASH",
    "--speculative-draft-model-path", "reference_engine/tiny/draft-capturable",
    "--speculative-num-draft-tokens", "8",
    "--speculative-draft-attention-backend", "intel_amx", *owned("1"),
    "--device", "cpu", "--attention-backend", "intel_amx", "--dtype", "bfloat16",
    "--disable-overlap-schedule", "--disable-cuda-graph", "--sampling-backend", "pytorch",
    "--grammar-backend", "none", "--mem-fraction-static", "0.4", "--max-total-tokens", "4096",
    "--skip-server-warmup", "--decode-log-interval", "1", "--sleep-on-idle",
]

# Its workload grid and soak: the same launch line (the grid adds its prefix-cache flag per
# launch, tests/protocols/test_grid_launches.py).
GOLDEN["tiny_dflash_grid_sglang_cpu"] = list(GOLDEN["tiny_dflash_sglang_cpu"])


# The seed's pairs in miniature (docs/seed-models.md): each GPU suite's own line with the
# model paths swapped, the draft's and the target's backend intel_amx, one rank, the KV
# fraction of the CPU suites, then SGLang's DFLASH-on-CPU flags appended.
SEED_CPU_TAIL = ["--device", "cpu", "--disable-overlap-schedule", "--disable-cuda-graph",
                 "--sampling-backend", "pytorch", "--grammar-backend", "none",
                 "--decode-log-interval", "1", "--sleep-on-idle"]


def seed_cpu(pair: str, draft_size: list[str], serving: list[str]) -> list[str]:
    """A seed pair's CPU line: its draft's size flag and its GPU suite's serving flags."""
    weights = f"reference_engine/seed/{pair}"
    return [*SGLANG, "--model-path", f"{weights}/target", "--speculative-algorithm", "DFLASH",
            "--speculative-draft-model-path", f"{weights}/draft", *draft_size,
            "--speculative-draft-attention-backend", "intel_amx", *owned("1"), *serving,
            *SEED_CPU_TAIL]


GOLDEN["gemma4_dflash_sglang_cpu"] = seed_cpu("gemma4", ["--speculative-num-draft-tokens", "16"], [
    "--trust-remote-code", "--attention-backend", "intel_amx", "--dtype", "bfloat16",
    "--mem-fraction-static", "0.4", "--max-running-requests", "16",
    "--context-length", "2048", "--max-total-tokens", "32768", "--skip-server-warmup",
])
GOLDEN["muse_glimmer_dflash_sglang_cpu"] = seed_cpu(
    "muse_glimmer", ["--speculative-dflash-block-size", "5"], [
        "--reasoning-parser", "muse", "--tool-call-parser", "muse", "--language-model-only",
        "--speculative-draft-load-format", "auto", "--mem-fraction-static", "0.4",
        "--attention-backend", "intel_amx", "--max-total-tokens", "4096",
    ])


@pytest.fixture
def muse_weights(monkeypatch: pytest.MonkeyPatch) -> None:
    """The Muse suite's weights have no public id: they come from the environment."""
    monkeypatch.setenv("MUSE_GLIMMER_TARGET", "/models/muse-glimmer")
    monkeypatch.setenv("MUSE_GLIMMER_DRAFT", "/models/muse-glimmer-assistant")
    monkeypatch.setenv("HARNESS_TINY_CAUSAL_DRAFT", "/models/tiny-causal-draft")


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_golden_launch_line(name: str, muse_weights: None) -> None:
    suite = load_suite(name).suite
    assert sglang.launch_command(suite, "python", "127.0.0.1", 30000) == GOLDEN[name]


def test_every_shipped_sglang_suite_has_a_golden_line() -> None:
    from harness.suite.model import shipped_suites

    sglang_suites = {p.stem for p in shipped_suites()
                     if load_suite(p).suite.engine.kind == "sglang"}
    assert sglang_suites == set(GOLDEN)


def _pairs(argv: list[str]) -> dict[str, str | None]:
    """flag -> value (None for a store_true flag)."""
    out: dict[str, str | None] = {}
    for i, arg in enumerate(argv):
        if arg.startswith("--"):
            nxt = argv[i + 1] if i + 1 < len(argv) else None
            out[arg] = None if nxt is None or nxt.startswith("--") else nxt
    return out


def test_gemma_line_has_the_same_flags_as_sglangs_gate() -> None:
    ours = _pairs(GOLDEN["gemma4_dflash_31b"][3:])
    theirs = _pairs(SGLANG_GEMMA_OTHER_ARGS)
    assert {k: ours.get(k, "<absent>") for k in theirs} == theirs
    # what we add: the target, the port/host the harness owns, a seed
    assert set(ours) - set(theirs) == {"--model-path", "--random-seed", "--host", "--port"}


def test_dflash_aliases_pass_one_flag_only() -> None:
    suite, _ = parse_suite(FULL_SGLANG_SUITE, "f.toml")  # both set, equal
    argv = sglang.launch_command(suite, "py", "127.0.0.1", 1234)
    assert argv.count("--speculative-num-draft-tokens") == 1
    assert "--speculative-dflash-block-size" not in argv


def test_revisions_and_optional_speculative_flags() -> None:
    text = FULL_SGLANG_SUITE.replace('model = "org/draft"', 'model = "org/draft"\nrevision = "abc"')
    text = text.replace("block_size = 16", "num_steps = 1\neagle_topk = 1")
    suite, _ = parse_suite(text, "f.toml")
    pairs = _pairs(sglang.launch_command(suite, "py", "127.0.0.1", 1234))
    assert pairs["--revision"] == "main"
    assert pairs["--speculative-draft-model-revision"] == "abc"  # a separate flag in SGLang
    assert pairs["--speculative-num-steps"] == "1" and pairs["--speculative-eagle-topk"] == "1"
    assert pairs["--port"] == "1234"


@pytest.mark.parametrize(
    "extra",
    [
        ["--host", "0.0.0.0"],
        ["--host=0.0.0.0"],
        ["--port", "8000"],
        ["--port=8000"],
        ["--tp-size", "4"],
        ["--tp-size=4"],
        ["--model-path", "other/model"],
        # SGLang's aliases of the same fields (fields/parallel.py, fields/model.py,
        # fields/spec.py): argparse takes the last value, so these would override too.
        ["--tensor-parallel-size", "4"],
        ["--tensor-parallel-size=4"],
        ["--model", "other/model"],
        ["--speculative-draft-model", "other/draft"],
        # flags the harness sets that the first version did not refuse
        ["--speculative-draft-attention-backend", "triton"],
        ["--random-seed", "1"],
        ["--revision", "abc"],
        ["--speculative-draft-model-revision", "abc"],
        ["--speculative-num-steps", "3"],
        # argparse abbreviations reach the same settings
        ["--speculative-alg", "EAGLE"],
        ["--speculative-num-draft", "8"],
        ["--tp", "4"],
        ["--rand=1"],
        # a YAML file whose keys would set any of them
        ["--config", "server.yaml"],
    ],
    ids=" ".join,
)
def test_extra_args_may_not_override_owned_flags(extra: list[str]) -> None:
    suite = load_suite("qwen3_8b_dflash").suite
    engine = suite.engine.model_copy(update={"extra_args": ["--trust-remote-code", *extra]})
    suite = suite.model_copy(update={"engine": engine})
    with pytest.raises(BadInput) as caught:
        sglang.launch_command(suite, "python", "127.0.0.1", 30000)
    assert "engine.extra_args may not set" in caught.value.message
    assert suite.name in caught.value.message
    assert extra[0] in caught.value.message


@pytest.mark.parametrize("extra", [["--speculative-draft-load-format", "auto"],
                                   ["--model-loader-extra-config", "{}"],
                                   ["--attention-backend", "triton"], ["--dtype=bfloat16"]])
def test_other_flags_pass(extra: list[str]) -> None:
    suite = load_suite("qwen3_8b_dflash").suite
    engine = suite.engine.model_copy(update={"extra_args": extra})
    argv = sglang.launch_command(suite.model_copy(update={"engine": engine}), "py", "h", 1)
    assert argv[-len(extra):] == extra


def test_muse_weights_must_be_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MUSE_GLIMMER_TARGET", raising=False)
    monkeypatch.delenv("MUSE_GLIMMER_DRAFT", raising=False)
    suite = load_suite("muse_glimmer_dflash_gsm8k").suite
    with pytest.raises(BadInput, match=r"\$MUSE_GLIMMER_TARGET, which is not set"):
        sglang.launch_command(suite, "python", "127.0.0.1", 30000)


def test_launch_command_rejects_a_reference_suite() -> None:
    suite, _ = parse_suite('name = "r"\n[engine]\nkind = "reference"\n[topology]\ngpus = 0\n'
                           "[floors]\naccept_length = 2\n", "r.toml")
    with pytest.raises(BadInput, match="not an sglang suite"):
        sglang.launch_command(suite, "python", "127.0.0.1", 30000)


REFERENCE_SUITE = """\
name = "tiny_ref"

[engine]
kind = "reference"
attention_policy = "regressed"
draft_noise = 0.25
extra_args = ["--threads", "2"]

[speculative]
block_size = 8

[topology]
gpus = 0

[workload]
seed = 7

[floors]
accept_length = 2.0
"""


# REFERENCE_SUITE's line, with /ckpt/target and /ckpt/draft as its checkpoints.
REFERENCE_GOLDEN = [
    "python", "-m", "reference_engine",
    "--target", "/ckpt/target",
    "--draft", "/ckpt/draft",
    "--host", "127.0.0.1",
    "--port", "30000",
    "--attention-policy", "regressed",
    "--draft-noise", "0.25",
    "--seed", "7",
    "--block-size", "8",
    "--threads", "2",
]


def reference_line(folder: Path) -> list[str]:
    """REFERENCE_SUITE's launch line, the suite loaded from a file in `folder`."""
    path = folder / "tiny_ref.toml"
    path.write_text(REFERENCE_SUITE)
    suite = load_suite(path).suite
    return reference_launch.launch_command(suite, "python", "127.0.0.1", 30000,
                                           Path("/ckpt/target"), Path("/ckpt/draft"))


def test_reference_launch_line(tmp_path: Path) -> None:
    assert reference_line(tmp_path) == REFERENCE_GOLDEN


def test_reference_launch_defaults_and_reserved_flags(tmp_path: Path) -> None:
    suite, _ = parse_suite('name = "r"\n[engine]\nkind = "reference"\n[topology]\ngpus = 0\n'
                           "[floors]\naccept_length = 2\n", "r.toml")
    argv = reference_launch.launch_command(suite, "py", "127.0.0.1", 1, Path("t"), Path("d"))
    assert argv[-6:] == ["--attention-policy", "fixed", "--draft-noise", "0", "--seed", "0"]
    assert "--block-size" not in argv
    bad = suite.model_copy(update={"engine": suite.engine.model_copy(
        update={"extra_args": ["--port=1"]})})
    with pytest.raises(BadInput, match="may not set --port=1"):
        reference_launch.launch_command(bad, "py", "127.0.0.1", 1, Path("t"), Path("d"))
    gemma = load_suite("gemma4_dflash_31b").suite
    with pytest.raises(BadInput, match="not a reference-engine suite"):
        reference_launch.launch_command(gemma, "py", "127.0.0.1", 1, Path("t"), Path("d"))
