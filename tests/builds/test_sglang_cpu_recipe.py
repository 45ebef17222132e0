"""SGLang on a CPU host, the parts that need no engine: the CPU recipe's dependency rule on
the real 0.5.23 wheel, the build identity, NGRAM without a draft, `--engine-python` for
SGLang suites, stand-ins on the server's path and in the record. (The real server runs in
`nox -s sglang_cpu`, tests/sglang_cpu.)"""

from __future__ import annotations

import types
from pathlib import Path

import pytest

from harness import builds
from harness.builds.sglang_cpu import cpu_dependencies, cuda_only, host_device
from harness.engines.sglang import launch_command
from harness.errors import BadInput
from harness.run.plan import choose_build, server_env, stand_in_folders
from harness.run.runner import RunOptions
from harness.suite.checkpoints import resolve_models
from harness.suite.model import load_suite, parse_suite
from tests.audit.conftest import wheel_for

NGRAM = load_suite("tiny_ngram_sglang_cpu")


@pytest.mark.parametrize(("line", "left_out"), [
    ("torch==2.14.1", True), ("torchvision", True), ("torchaudio==2.11.0", True),
    ("sglang-kernel==0.4.10", True), ("flashinfer_python[cu13]==0.7.2", True),
    ("nvidia-cutlass-dsl[cu13]==4.8.0", True), ("nvshmem4py-cu13", True),
    ("cuda-python>=13.0", True), ("humming-kernels[cu13]==0.1.12", True),
    ("nvidia-ml-py", False), ("transformers==5.19.0", False), ("xgrammar==0.2.7", False),
    ("numba==0.65.1", False), ("apache-tvm-ffi==0.1.11", False),
])
def test_the_cuda_only_rule(line: str, left_out: bool) -> None:
    assert cuda_only(line) is left_out


def test_dependencies_come_from_the_wheels_own_metadata() -> None:
    kept, left_out = cpu_dependencies(wheel_for("0.5.23"))
    assert "transformers==5.19.0" in kept and "sglang-kernel==0.4.10" in left_out
    assert not any(cuda_only(line) for line in kept)
    # markers evaluated for this platform: the aarch64-only and extra-only lines are gone
    assert not any(line.startswith(("av", "decord2", "diffusers", "pytest")) for line in kept)
    assert (len(kept), len(left_out)) == (58, 18)


def test_a_cpu_host_gets_its_own_build_identity(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = builds.parse_build_spec("sglang==0.5.23")
    monkeypatch.setenv("HARNESS_SGLANG_DEVICE", "cpu")
    cpu = builds.resolve_build(spec)
    monkeypatch.setenv("HARNESS_SGLANG_DEVICE", "cuda")
    cuda = builds.resolve_build(spec)
    assert host_device() == "cuda" and cuda.device == "cuda" and cpu.device == "cpu"
    assert cpu.key != cuda.key and cpu.identity["torch"] == "torch==2.13.0"
    monkeypatch.setenv("HARNESS_SGLANG_DEVICE", "cpu")
    assert builds.resolve_build(spec).key == cpu.key


def test_ngram_needs_no_draft_and_refuses_one() -> None:
    models = resolve_models(NGRAM.suite)
    assert models is not None and models.draft is None
    command = launch_command(NGRAM.suite, "python", "127.0.0.1", 1, models)
    assert "--speculative-draft-model-path" not in command
    with pytest.raises(BadInput, match="uses no draft"):
        resolve_models(NGRAM.suite, draft="org/draft")
    text = (Path(NGRAM.path).read_text().replace('[speculative]',
                                                 '[draft]\nmodel = "org/d"\n[speculative]'))
    with pytest.raises(Exception, match=r"remove \[draft\]\.model"):
        parse_suite(text, "ngram-with-draft.toml")


def test_engine_python_names_the_sglang_to_run() -> None:
    options = RunOptions(engine_python="/usr/bin/python3")
    _, chosen = choose_build(NGRAM, options)
    assert chosen.spec.kind == "installed"
    with pytest.raises(BadInput, match="does not go with --sglang"):
        choose_build(NGRAM, RunOptions(engine_python="/usr/bin/python3", sglang="0.5.23"))
    with pytest.raises(BadInput, match="no such interpreter"):
        builds.prepare(chosen.spec, python="/no/such/python")


def test_stand_ins_go_first_on_the_servers_path_with_the_builds_env() -> None:
    facts = types.SimpleNamespace(build_note={"installed": {
        "engine_env": {"SGLANG_USE_CPU_ENGINE": "1"}}})
    env = server_env(NGRAM.suite, None, facts)
    folder = str(builds.REPO_ROOT / "tests" / "cpu_stand_ins")
    assert env["PYTHONPATH"].split(":")[0] == folder
    assert env["SGLANG_USE_CPU_ENGINE"] == "1"
    assert stand_in_folders(NGRAM.suite) == [Path(folder)]
    missing = NGRAM.suite.model_copy(update={"engine": NGRAM.suite.engine.model_copy(
        update={"stand_ins": ["tests/no_such_folder"]})})
    with pytest.raises(BadInput, match="no such folder"):
        server_env(missing, None)
