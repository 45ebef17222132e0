"""`harness matrix` for the shipped suites, runner matching and config errors."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from harness.ci.matrix import RUNNERS_FILE, build_matrix, load_runners, nox_sessions
from harness.commands.parsers.matrix import MatrixCommand
from harness.errors import BadInput
from harness.suite.model import SUITES_DIR, load_suite

SHIPPED = {
    # suite: (nox session, runner label, gpus)
    "gemma4_dflash_31b": ("gemma4_dflash", "2-gpu-h100", 2),
    "qwen3_8b_dflash": ("qwen3_8b_dflash", "1-gpu-h100", 1),
    "muse_glimmer_dflash_gsm8k": ("muse_glimmer_gsm8k", "1-gpu-h100", 1),
    "tiny_dflash_cpu": ("tiny_dflash", "cpu", 0),
}


def matrix_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    command = MatrixCommand()
    parser = argparse.ArgumentParser()
    command.add_arguments(parser)
    assert command.run(parser.parse_args(list(argv))) == 0
    return json.loads(capsys.readouterr().out)


def test_matrix_of_the_shipped_suites(capsys: pytest.CaptureFixture[str]) -> None:
    entries = {e["suite"]: e for e in matrix_json(capsys)["include"]}
    present = {name: SHIPPED[name] for name in SHIPPED if (SUITES_DIR / f"{name}.toml").exists()}
    assert {"gemma4_dflash_31b", "qwen3_8b_dflash", "muse_glimmer_dflash_gsm8k"} <= set(present)
    assert set(entries) == {p.stem for p in SUITES_DIR.glob("*.toml")}
    for name, (session, runner, gpus) in present.items():
        entry = entries[name]
        assert (entry["session"], entry["runner"], entry["gpus"]) == (session, runner, gpus), name
        assert entry["file"] == f"suites/{name}.toml"
        expected_runs_on = "ubuntu-latest" if gpus == 0 else ["self-hosted", runner]
        assert entry["runs_on"] == expected_runs_on


def test_nightly_only_and_named_suites(capsys: pytest.CaptureFixture[str]) -> None:
    nightly = matrix_json(capsys, "--nightly-only")["include"]
    assert all(entry["nightly"] for entry in nightly)
    assert {"gemma4_dflash_31b", "qwen3_8b_dflash"} <= {e["suite"] for e in nightly}
    named = matrix_json(capsys, "gemma4_dflash_31b, qwen3_8b_dflash")["include"]
    assert [e["suite"] for e in named] == ["qwen3_8b_dflash", "gemma4_dflash_31b"]  # by runner


def test_sessions_come_from_the_noxfile() -> None:
    sessions = nox_sessions()
    assert sessions.get("gemma4_dflash_31b") == "gemma4_dflash"
    assert sessions.get("qwen3_8b_dflash") == "qwen3_8b_dflash"


def _suite(tmp_path: Path, name: str, topology: str) -> Path:
    path = tmp_path / f"{name}.toml"
    path.write_text(f'name = "{name}"\n[engine]\nkind = "reference"\n[topology]\n{topology}\n'
                    '[floors]\naccept_length = 1.5\n')  # fmt: skip
    return path


def test_smallest_fitting_runner_and_overrides(tmp_path: Path) -> None:
    runners = tmp_path / "runners.toml"
    runners.write_text(
        '[[runner]]\nlabel = "4-gpu-a100"\ngpus = 4\ngpu = "A100"\nmemory_gib = 40\n'
        '[[runner]]\nlabel = "8-gpu-h200"\ngpus = 8\ngpu = "H200"\nmemory_gib = 141\n'
        '[[runner]]\nlabel = "2-gpu-h100"\ngpus = 2\ngpu = "H100"\nmemory_gib = 80\n'
        '[suites]\npinned = "8-gpu-h200"\n'
    )
    config = load_runners(runners)
    suites = [
        load_suite(_suite(tmp_path, "one", "gpus = 1")),
        load_suite(_suite(tmp_path, "four", 'gpus = 3\ngpu_types = ["H100", "H200"]')),
        load_suite(_suite(tmp_path, "big", "gpus = 2\nmin_memory_gib = 100")),
        load_suite(_suite(tmp_path, "pinned", "gpus = 1")),
    ]
    entries = {e["suite"]: e["runner"] for e in build_matrix(suites, config, {})["include"]}
    assert entries == {"one": "2-gpu-h100", "four": "8-gpu-h200", "big": "8-gpu-h200",
                       "pinned": "8-gpu-h200"}  # fmt: skip
    # without a CPU runner a CPU suite takes the smallest machine there is
    cpu = load_suite(_suite(tmp_path, "cpu_only", "gpus = 0"))
    assert build_matrix([cpu], config, {})["include"][0]["runner"] == "2-gpu-h100"
    huge = load_suite(_suite(tmp_path, "huge", "gpus = 16"))
    with pytest.raises(BadInput, match="no runner in the runner config fits 16 x any GPU"):
        build_matrix([huge], config, {})


def test_bad_runner_config_is_bad_input(tmp_path: Path) -> None:
    runners = tmp_path / "runners.toml"
    runners.write_text('[[runner]]\nlabel = "x"\ngpus = 1\ncolour = "red"\n')
    with pytest.raises(BadInput, match="invalid runner config"):
        load_runners(runners)
    runners.write_text('[[runner]]\nlabel = "x"\ngpus = 1\n[suites]\ns = "nope"\n')
    with pytest.raises(BadInput, match="no \\[\\[runner\\]\\] has that label"):
        build_matrix([load_suite(_suite(tmp_path, "s", "gpus = 1"))], load_runners(runners), {})


def test_shipped_runner_config_loads() -> None:
    labels = [runner.label for runner in load_runners(RUNNERS_FILE).runner]
    assert {"cpu", "1-gpu-h100", "2-gpu-h100"} <= set(labels)


def test_builds_give_one_labelled_job_per_sglang_suite() -> None:
    from harness.ci.matrix import build_matrix, load_runners, parse_builds
    from harness.suite.model import load_suite

    builds = parse_builds(["main=git+https://github.com/sgl-project/sglang@abc#subdirectory=python",
                           "release=sglang==0.5.23"])
    suites = [load_suite("qwen3_8b_dflash"), load_suite("tiny_dflash_cpu")]
    include = build_matrix(suites, load_runners(), builds=builds)["include"]
    qwen = [e for e in include if e["suite"] == "qwen3_8b_dflash"]
    assert [(e["build_label"], e["build"]) for e in qwen] == [
        ("main", "git+https://github.com/sgl-project/sglang@abc#subdirectory=python"),
        ("release", "sglang==0.5.23")]
    tiny = [e for e in include if e["suite"] == "tiny_dflash_cpu"]
    assert len(tiny) == 1 and tiny[0]["build"] is None  # not an SGLang suite


@pytest.mark.parametrize("bad", ["release", "=x", "a b=x", "release="])
def test_bad_build_entries(bad: str) -> None:
    from harness.ci.matrix import parse_builds
    from harness.errors import BadInput

    with pytest.raises(BadInput, match="LABEL=SPEC"):
        parse_builds([bad])
