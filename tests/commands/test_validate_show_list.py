"""`harness validate`, `show` and `list` through `harness.cli.main`: exit codes and messages."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.cli import main
from tests.fixtures.suites_and_host import MINIMAL_SUITE, SHIPPED_SUITES, SUITES_DIR


def _write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text)
    return path


def test_validate_shipped_suites(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(SUITES_DIR)]) == 0
    out = capsys.readouterr().out
    for path in SHIPPED_SUITES:
        assert f"ok       {path}" in out
    assert f"{len(SHIPPED_SUITES)} valid, 0 invalid" in out


def test_validate_bad_suite_exits_2_naming_file_and_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = _write(tmp_path, "good.toml", MINIMAL_SUITE)
    bad = _write(tmp_path, "bad.toml", MINIMAL_SUITE.replace("gpus = 0", "gpus = 0\ngpu = 1"))
    assert main(["validate", str(good), str(bad)]) == 2
    captured = capsys.readouterr()
    assert f"ok       {good}" in captured.out
    assert "1 valid, 1 invalid" in captured.out
    assert f"{bad}: invalid suite" in captured.err
    assert "topology.gpu: unknown field" in captured.err
    assert "Traceback" not in captured.out + captured.err


def test_validate_folder_with_invalid_toml(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _write(tmp_path, "a.toml", MINIMAL_SUITE)
    _write(tmp_path, "b.toml", "name = [\n")
    assert main(["validate", str(tmp_path)]) == 2
    captured = capsys.readouterr()
    assert f"{tmp_path / 'b.toml'}: not valid TOML" in captured.err
    assert "1 valid, 1 invalid" in captured.out


def test_validate_empty_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("harness validate: no suite files in")
    assert "Traceback" not in err


def test_validate_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nope.toml"
    assert main(["validate", str(missing)]) == 2
    captured = capsys.readouterr()
    assert f"{missing}: no such suite file" in captured.err
    assert "0 valid, 1 invalid" in captured.out


def test_show_by_name(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", "gemma4_dflash_31b"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"# {SUITES_DIR / 'gemma4_dflash_31b.toml'}  sha256 ")
    assert 'name = "gemma4_dflash_31b"' in out  # TOML's own words (issue 31)
    assert "\nnum_draft_tokens = 16\n" in out
    assert "\nrequest_timeout_s = 600.0\n" in out  # defaults are filled in


def test_show_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", "qwen3_8b_dflash", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["suite"]["name"] == "qwen3_8b_dflash"
    # 95% of Qwen3-8B's own figure (z-lab/dflash #7), its reference cited
    assert data["suite"]["floors"] == {"accept_length": 6.08, "accuracy": None, "strict": False,
                                       "accuracy_strict": False, "positions_strict": False,
                                       "alpha": 0.05, "beta": 0.2,
                                       "metric": "spec_accept_length_mean", "categories": {},
                                       "positions": [], "speedup_tpot": None,
                                       "speedup_throughput": None,
                                       "reference": "zlab-dflash-7.qwen3-8b.gsm8k-en"}
    assert data["suite"]["workload"]["reproduces"] == {"protocol": "dflash.benchmark.sglang",
                                                       "dataset": "gsm8k"}
    # the sampled entry, with SGLang's T = 0.6 floors (test_dflash.py)
    _, entry = data["suite"]["workloads"]
    assert (entry["name"], entry["temperature"], entry["top_p"]) == ("t06", 0.6, 0.95)
    assert entry["floors"]["accept_length"] == 2.0 and entry["floors"]["accuracy"] == 0.6
    assert len(data["sha256"]) == 64


def test_show_unknown_suite(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", "no_such_suite"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("harness show: no_such_suite: no suite file or suite name matches")
    assert "gemma4_dflash_31b" in err  # lists the known ones
    assert "Traceback" not in err


def test_show_invalid_suite(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = _write(tmp_path, "bad.toml", MINIMAL_SUITE.replace('"reference"', '"tgi"'))
    assert main(["show", str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"harness show: {bad}: invalid suite" in err
    assert "engine: got 'tgi'; allowed: 'sglang', 'reference', 'vllm'" in err


def test_list_shipped(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(SHIPPED_SUITES)
    gemma = next(line for line in lines if line.startswith("gemma4_dflash_31b"))
    assert "sglang" in gemma and "2 x H100/H200" in gemma and "nightly" in gemma


def test_list_with_an_invalid_suite(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _write(tmp_path, "tiny.toml", MINIMAL_SUITE)
    _write(tmp_path, "zbroken.toml", MINIMAL_SUITE.replace("accept_length = 2.0", ""))
    assert main(["list", "--suites-dir", str(tmp_path)]) == 2
    out = capsys.readouterr().out
    assert "tiny" in out and "reference" in out and "CPU" in out
    assert "zbroken" in out and "INVALID:" in out


def test_no_command_prints_help_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert "usage: harness" in capsys.readouterr().out


@pytest.mark.parametrize(("kind", "arg", "named"), [
    ("reference", '"--port", "1"', "--port"),
    ("reference", '"--seed=3"', "--seed"),
    ("sglang", '"--port", "1"', "--port"),
    ("sglang", '"--speculative-alg", "EAGLE"', "--speculative-alg (taken as "
     "--speculative-algorithm)"),
    ("sglang", '"--api-k", "sk-x1234"', "abbreviates the secret flag --api-key as --api-k"),
])  # fmt: skip
def test_validate_runs_the_run_s_flag_checks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str, arg: str, named: str
) -> None:
    """Issue 20, case 10: what `harness run` refuses (exit 2), `harness validate` refuses."""
    models = '\n[target]\nmodel = "org/t"\n[draft]\nmodel = "org/d"\n' if kind == "sglang" else ""
    text = (MINIMAL_SUITE.replace('kind = "reference"', f'kind = "{kind}"\nextra_args = [{arg}]')
            .replace("gpus = 0", "gpus = 0" if kind == "reference" else "gpus = 1") + models)
    path = _write(tmp_path, "flags.toml", text)
    assert main(["validate", str(path)]) == 2
    captured = capsys.readouterr()
    assert f"{path}: suite tiny: engine.extra_args" in captured.err and named in captured.err
    assert "0 valid, 1 invalid" in captured.out
    results = tmp_path / "results"
    assert main(["run", str(path), "--results", str(results)]) == 2
    assert named in capsys.readouterr().err
    assert not results.exists()  # refused before any run folder
