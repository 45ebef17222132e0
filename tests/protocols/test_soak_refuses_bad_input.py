"""`harness soak`'s input refused before anything runs: the duration and the window (a
window longer than the duration or making one window, zero, negative, huge, words, a
number as a string in the suite), the drift gate's tolerance and level, a suite that turns
the prefix cache off; each exit 2 with a message naming the field, no traceback, no run."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.cli import main
from harness.errors import BadInput
from harness.protocols.soak import parse_duration, soak_settings
from harness.suite.soak import MAX_DURATION_S, Soak
from tests.fixtures.sglang_double import SUITE_TEMPLATE
from tests.parsed_or_refused import parsed_or_refused
from tests.protocols.refusals import refused_before_any_run
from tests.tiny_variants import tiny_variant

DURATION = re.compile(r"^\s*[0-9]+(\.[0-9]+)?[smh]?\s*$")


def test_durations_read_in_their_units() -> None:
    assert parse_duration("90", "--duration") == 90.0
    assert parse_duration("90s", "--duration") == 90.0
    assert parse_duration("10m", "--duration") == 600.0
    assert parse_duration(" 1.5h ", "--duration") == 5400.0
    found = soak_settings(Soak(duration_s=600.0, window_s=60.0, max_drift=0.1), window="2m")
    assert (found.duration_s, found.window_s, found.max_drift) == (600.0, 120.0, 0.1)


@pytest.mark.parametrize(("text", "named"), [
    ("", "not a duration"), ("ten", "'ten'"), ("0", "above 0"), ("0s", "above 0"),
    ("-5m", "'-5m'"), ("1e3", "'1e3'"), ("nan", "'nan'"), ("inf", "'inf'"),
    ("5 minutes", "'5 minutes'"), ("1d", "'1d'"), ("169h", "at most a week"),
    (str(10**30), "at most a week"), ("٣m", "'٣m'"), ("5m5s", "'5m5s'"),
])
def test_each_bad_duration_is_named(text: str, named: str) -> None:
    with pytest.raises(BadInput) as caught:
        parse_duration(text, "--duration")
    assert named in caught.value.message and caught.value.message.startswith("--duration")


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=24),
                 st.builds(lambda n, unit: f"{n}{unit}",
                           st.floats(allow_nan=True, allow_infinity=True) | st.integers(),
                           st.sampled_from(["", "s", "m", "h", "d", " "]))))
def test_any_text_is_a_duration_within_a_week_or_refused(text: str) -> None:
    seconds = parsed_or_refused(lambda: parse_duration(text, "--window"), "--window")
    if seconds is None:
        return
    assert DURATION.match(text)
    assert 0.0 < seconds <= MAX_DURATION_S and math.isfinite(seconds)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("soak-input") / "tiny_soak_input.toml"
    path.write_text(tiny_variant("tiny_soak_input", floor=1.5, questions=4))
    return path


@pytest.mark.parametrize(("flags", "said"), [
    (["--duration", "10s", "--window", "20s"], "--window: the window (20 s) is longer than "
                                               "the duration (10 s)"),
    (["--duration", "10s", "--window", "10s"], "one window"),
    (["--duration", "10s", "--window", "0.0001s"], "at most 10000"),
    (["--duration", "0", "--window", "1s"], "--duration 0"),
    (["--duration=-10s", "--window", "1s"], "--duration '-10s'"),
    (["--duration", "9999h", "--window", "1h"], "--duration 9999h"),
    (["--duration", "ten", "--window", "1s"], "--duration 'ten'"),
    (["--duration", "10s", "--window", "one"], "--window 'one'"),
    (["--duration", "10s"], "no soak window"),
    (["--window", "1s"], "no soak duration"),
    (["--duration", "10s", "--window", "1s", "--max-drift", "0"], "--max-drift"),
    (["--duration", "10s", "--window", "1s", "--max-drift", "1.5"], "--max-drift"),
    (["--duration", "10s", "--window", "1s", "--max-drift", "nan"], "--max-drift"),
    (["--duration", "10s", "--window", "1s", "--alpha", "0.5"], "--alpha"),
    (["--duration", "10s", "--window", "1s", "--questions", "0"], "--questions"),
])
def test_the_command_refuses_before_any_run(tiny: Path, tmp_path: Path, flags: list[str],
                                            said: str, capsys: pytest.CaptureFixture[str]
                                            ) -> None:
    assert said in refused_before_any_run(["soak", str(tiny), *flags], tmp_path, capsys)
    results = tmp_path / "results"
    assert not (results / "runs").exists() and not (results / "soak").exists()


@pytest.mark.parametrize(("table", "said"), [
    ('duration_s = "600"\nwindow_s = 60.0', "soak.duration_s"),
    ('duration_s = 600.0\nwindow_s = "60"', "soak.window_s"),
    ("duration_s = 60.0\nwindow_s = 120.0", "longer than the duration"),
    ("duration_s = 0.0\nwindow_s = 1.0", "soak.duration_s"),
    ("duration_s = -60.0\nwindow_s = 1.0", "soak.duration_s"),
    ("duration_s = 1e12\nwindow_s = 1.0", "soak.duration_s"),
    ('duration_s = 60.0\nwindow_s = 6.0\nmax_drift = "0.05"', "soak.max_drift"),
    ("duration_s = 60.0\nwindow_s = 6.0\nhours = 2", "soak.hours"),
])
def test_a_bad_soak_table_is_named(tmp_path: Path, table: str, said: str,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "tiny_soak_table.toml"
    path.write_text(tiny_variant("tiny_soak_table", floor=1.5, questions=4)
                    + f"\n[soak]\n{table}\n")
    code = main(["soak", str(path), "--results", str(tmp_path / "results")])
    err = capsys.readouterr().err
    assert code == 2 and said in err and "Traceback" not in err, err


def test_a_suite_that_turns_the_prefix_cache_off_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "fake_no_cache.toml"
    path.write_text(SUITE_TEMPLATE.format(name="fake_no_cache", floor=1.0, questions=4,
                                          timeout=30).replace(
        '"--disable-overlap-schedule"]', '"--disable-overlap-schedule", "--disable-radix-cache"]'))
    code = main(["soak", str(path), "--duration", "10s", "--window", "2s", "--results",
                 str(tmp_path / "results")])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "engine.extra_args --disable-radix-cache" in err and "prefix caching on" in err


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(max_size=16), st.text(max_size=16))
def test_any_refused_pair_exits_2_through_the_command(tiny: Path, tmp_path: Path,
                                                     duration: str, window: str) -> None:
    try:
        soak_settings(None, duration, window)
    except BadInput:
        pass
    else:
        return  # a valid pair would run the soak
    results = tmp_path / "fuzz-results"
    assert main(["soak", str(tiny), f"--duration={duration}", f"--window={window}",
                 "--results", str(results), "--no-progress"]) == 2
    assert not (results / "runs").exists()
