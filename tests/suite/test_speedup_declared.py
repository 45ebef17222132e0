"""[speedup] in a suite: a speedup floor needs a baseline declared (refused at load naming
the file and the field), a baseline the harness cannot launch is refused before anything
runs (a prefill/decode split, a server attached with --server)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.cli import main
from harness.errors import SuiteError
from harness.metrics.floor_checks import floor_checks
from harness.suite.model import parse_suite
from tests.suite.test_impossible_suites import REFERENCE

SPEEDUP = '\n[speedup]\nbaseline = "target_only"\n'


def refused(text: str) -> str:
    with pytest.raises(SuiteError) as caught:
        parse_suite(text, "suites/s.toml")
    return caught.value.message


@pytest.mark.parametrize("field", ["speedup_tpot", "speedup_throughput"])
def test_a_speedup_floor_without_a_baseline_is_refused_naming_file_and_field(
        field: str) -> None:
    message = refused(REFERENCE + f"{field} = 1.5\n")
    assert "suites/s.toml" in message
    assert f"floors.{field}: a speedup floor needs a baseline" in message
    assert '[speedup] baseline = "target_only"' in message


def test_an_entrys_speedup_floor_is_refused_naming_the_entry() -> None:
    entry = ('\n[[workloads]]\nname = "warm"\nkind = "gsm8k"\nmax_tokens = 96\n'
             "[workloads.floors]\naccept_length = 2.0\nspeedup_tpot = 1.2\n")
    assert "workloads.warm.floors.speedup_tpot" in refused(REFERENCE + entry)


def test_declared_floors_become_typed_checks_with_their_definitions() -> None:
    suite, _ = parse_suite(REFERENCE + "speedup_tpot = 1.5\nspeedup_throughput = 1.2\n"
                           + SPEEDUP, "s.toml")
    checks = {check.key: check for check in floor_checks(suite.floors)}
    assert checks["speedup_tpot"].floor == 1.5
    assert checks["speedup_throughput"].definition == "speedup_throughput"
    assert suite.speedup is not None and suite.speedup.baseline == "target_only"


@pytest.mark.parametrize(("value", "says"), [
    ("0", "greater than 0"), ("-1.0", "greater than 0"), ('"2"', "valid number"),
    ("1e9", "less than or equal to 1000")])
def test_an_impossible_speedup_floor_is_refused(value: str, says: str) -> None:
    assert says in refused(REFERENCE + f"speedup_tpot = {value}\n" + SPEEDUP)


def test_an_unknown_baseline_is_refused() -> None:
    assert "target_only" in refused(REFERENCE + '\n[speedup]\nbaseline = "vanilla"\n')


def test_a_split_deployment_cannot_launch_its_target_alone() -> None:
    text = REFERENCE.replace('kind = "reference"', 'kind = "sglang"').replace(
        "[topology]\ngpus = 0\n", '[target]\nmodel = "a/b"\n[draft]\nmodel = "a/c"\n'
        "[topology]\ngpus = 2\n[topology.disaggregation]\n") + SPEEDUP
    assert "speedup.baseline: the harness launches no prefill/decode split" in refused(text)


def test_an_attached_server_is_refused_before_anything_runs(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    suite = tmp_path / "s.toml"
    suite.write_text(REFERENCE + SPEEDUP)
    code = main(["run", str(suite), "--server", "http://127.0.0.1:9",
                 "--results", str(tmp_path / "results")])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "--server" in err and "target alone" in err
    assert not (tmp_path / "results" / "runs").exists()  # refused before a run folder


def test_the_dry_run_shows_the_target_alones_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "tiny_dflash_speedup_cpu", "--dry-run"]) == 0
    out = capsys.readouterr().out
    [line] = [line for line in out.splitlines() if line.startswith("then ")]
    assert "the target alone ([speedup])" in line and line.endswith("--no-speculation")
    assert "--block-size" not in line


def test_a_tolerated_speedup_drop_is_read() -> None:
    suite, _ = parse_suite(REFERENCE + SPEEDUP + "max_drop = 0.15\n", "s.toml")
    assert suite.speedup is not None and suite.speedup.max_drop == 0.15


@pytest.mark.parametrize("value", ["0", "1", "1.5", "-0.1", "inf", "nan", '"0.1"', "true",
                                   "1e400", "[0.1]"])
def test_an_impossible_tolerated_speedup_drop_is_refused_naming_it(value: str) -> None:
    message = refused(REFERENCE + SPEEDUP + f"max_drop = {value}\n")
    assert "suites/s.toml" in message and "speedup.max_drop" in message


def test_validate_exits_2_on_an_impossible_drop(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    suite = tmp_path / "s.toml"
    suite.write_text(REFERENCE + SPEEDUP + "max_drop = 0\n")
    assert main(["validate", str(suite)]) == 2
    captured = capsys.readouterr()
    assert "speedup.max_drop" in captured.err + captured.out
    assert "Traceback" not in captured.err
