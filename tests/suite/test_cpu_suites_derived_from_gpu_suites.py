"""The CPU suites are derived from the GPU suites: the same launch line, only the model
paths and the CPU device flags swapped; the files in suites/ are their derivations."""

from __future__ import annotations

import subprocess
import sys
import tomllib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.suite.cpu_variants import (
    CPU_ADDED,
    CPU_DEFAULT_POOL,
    CPU_REPLACED,
    REPO,
    VARIANTS,
    cpu_extra_args,
    derived_text,
)
from harness.suite.model import load_suite

FLAGS = st.sampled_from(["--trust-remote-code", "--attention-backend", "--dtype",
                         "--mem-fraction-static", "--max-total-tokens", "--language-model-only",
                         "--skip-server-warmup", "--reasoning-parser", "x", "0.55", "", "--"])


def _gpu_flags_in_order(gpu: list[str], cpu: list[str]) -> bool:
    """Every GPU flag and value is in the CPU line in the same order, but for a replaced
    flag's value."""
    position = 0
    replaced_value = False
    for item in gpu:
        if replaced_value:
            replaced_value = False
            continue
        while position < len(cpu) and cpu[position] != item:
            position += 1
        if position == len(cpu):
            return False
        position += 1
        replaced_value = item in CPU_REPLACED
    return True


def _flags_stated(gpu: list[str]) -> set[str]:
    """The GPU line's items in a flag's place: a replaced flag's value is not one, even
    when it reads like a flag (`--attention-backend --mem-fraction-static`)."""
    stated: set[str] = set()
    index = 0
    while index < len(gpu):
        stated.add(gpu[index])
        index += 2 if gpu[index] in CPU_REPLACED else 1
    return stated


@given(st.lists(FLAGS, max_size=30))
def test_the_cpu_line_keeps_the_gpu_line(gpu: list[str]) -> None:
    cpu = cpu_extra_args(gpu)
    assert cpu[-len(CPU_ADDED):] == list(CPU_ADDED)
    assert _gpu_flags_in_order(gpu, cpu)
    assert "--attention-backend" in cpu  # a GPU line without one gets the CPU backend
    stated = _flags_stated(gpu)
    for flag, value in CPU_REPLACED.items():
        assert (flag in cpu) == (flag in stated or flag == "--attention-backend")
        for index, item in enumerate(cpu[:-len(CPU_ADDED)]):
            if item == flag and index + 1 < len(cpu):
                assert cpu[index + 1] == value
    assert "--max-total-tokens" in cpu
    if "--max-total-tokens" not in gpu:
        assert CPU_DEFAULT_POOL[1] in cpu


def test_a_replaced_flag_keeps_its_place() -> None:
    gpu = ["--trust-remote-code", "--attention-backend", "triton", "--dtype", "bfloat16",
           "--mem-fraction-static", "0.55", "--max-total-tokens", "32768"]
    assert cpu_extra_args(gpu) == [
        "--trust-remote-code", "--attention-backend", "intel_amx", "--dtype", "bfloat16",
        "--mem-fraction-static", "0.4", "--max-total-tokens", "32768", *CPU_ADDED]


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: v.name)
def test_the_shipped_cpu_suite_is_its_derivation(variant) -> None:
    path = REPO / "suites" / f"{variant.name}.toml"
    assert path.read_text() == derived_text(variant), (
        f"{path} differs from its derivation: run python -m harness.suite.cpu_variants")


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: v.name)
def test_only_models_and_device_flags_differ_from_the_gpu_suite(variant) -> None:
    gpu = load_suite(REPO / "suites" / f"{variant.source}.toml").suite
    cpu = load_suite(REPO / "suites" / f"{variant.name}.toml").suite
    assert cpu.engine.extra_args == cpu_extra_args(gpu.engine.extra_args)
    assert cpu.engine.default_build == gpu.engine.default_build
    same = gpu.speculative.model_copy(update={"draft_attention_backend": "intel_amx"})
    assert cpu.speculative == same
    assert str(cpu.target.model).startswith(f"reference_engine/seed/{variant.pair}/")
    assert cpu.topology.gpus == 0 and gpu.topology.gpus > 0
    assert cpu.floors.metric == gpu.floors.metric
    if gpu.gate is not None:
        assert cpu.gate.against == gpu.gate.against
        assert cpu.gate.relative_drop == gpu.gate.relative_drop


def test_check_mode_names_a_stale_suite(tmp_path, monkeypatch) -> None:
    done = subprocess.run([sys.executable, "-m", "harness.suite.cpu_variants", "--check"],
                          capture_output=True, text=True, cwd=REPO, check=False)
    assert done.returncode == 0, done.stderr
    from harness.suite import cpu_variants

    (tmp_path / "suites").mkdir()
    for variant in VARIANTS:
        (tmp_path / "suites" / f"{variant.name}.toml").write_text("name = 'stale'\n")
    monkeypatch.setattr(cpu_variants, "REPO", tmp_path)
    monkeypatch.setattr(cpu_variants, "derived_text", lambda v: "fresh")
    assert cpu_variants.main(["--check"]) == 1


def test_the_derived_suites_load_and_name_the_miniatures() -> None:
    for variant in VARIANTS:
        document = tomllib.loads((REPO / "suites" / f"{variant.name}.toml").read_text())
        assert document["engine"]["stand_ins"] == ["tests/cpu_stand_ins"]
        for role in ("target", "draft"):
            assert (REPO / document[role]["model"] / "config.json").is_file()
