"""`harness sweep`'s input refused before anything runs: the concurrency list (zero,
negative, words, duplicates, huge values, beyond the workload's questions, empty) and the
tolerated drop, each with a message naming the value, exit 2, no traceback, no run folder."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.cli import main
from harness.errors import BadInput
from harness.protocols.sweep import MAX_CONCURRENCY, parse_concurrencies
from tests.parsed_or_refused import parsed_or_refused
from tests.protocols.refusals import refused_before_any_run, tiny_suite_file
from tests.tiny_variants import tiny_variant

ITEM = re.compile(r"^\s*[0-9]+\s*$")


def test_a_good_list_is_ascending_and_whole() -> None:
    assert parse_concurrencies("1,4,16") == (1, 4, 16)
    assert parse_concurrencies(" 16, 1 ,4") == (1, 4, 16)
    assert parse_concurrencies("128") == (128,)


@pytest.mark.parametrize(("text", "named"), [
    ("", "empty"), (" , ", "empty"), ("1,,4", "''"), ("0", "0"), ("1,-4", "-4"),
    ("1,four", "four"), ("1.5", "1.5"), ("1,4,4", "4"), ("1e3", "1e3"), ("+4", "+4"),
    ("٣", "٣"), (str(10**30), str(10**30)[:12]), ("nan", "nan"), ("0x10", "0x10"),
])
def test_each_bad_list_is_named(text: str, named: str) -> None:
    with pytest.raises(BadInput) as caught:
        parse_concurrencies(text)
    assert named in caught.value.message and "--concurrency" in caught.value.message


@settings(max_examples=400, deadline=None)
@given(st.one_of(
    st.text(max_size=40),
    st.lists(st.integers(min_value=-10, max_value=2 * MAX_CONCURRENCY), max_size=8).map(
        lambda values: ",".join(map(str, values))),
    st.lists(st.sampled_from(["1", "4", "0", "-1", "x", " ", "16", "1.0", "", "9" * 25]),
             max_size=6).map(",".join),
))
def test_any_text_parses_to_a_valid_list_or_is_refused(text: str) -> None:
    parsed = parsed_or_refused(lambda: parse_concurrencies(text), "--concurrency")
    if parsed is None:
        return
    items = text.split(",")
    assert all(ITEM.match(item) for item in items)
    assert list(parsed) == sorted({int(item) for item in items})
    assert len(parsed) == len(items)  # no duplicate was merged away
    assert all(1 <= value <= MAX_CONCURRENCY for value in parsed)


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    return tiny_suite_file(tmp_path, "tiny_sweep_input", questions=8)


@pytest.mark.parametrize(("flags", "said"), [
    (["--concurrency", "0"], "0"),
    (["--concurrency", "1,4,4"], "twice"),
    (["--concurrency", "fast"], "fast"),
    (["--concurrency", ""], "empty"),
    (["--concurrency", "1,16"], "16 is more than the 8 questions"),
    (["--concurrency", "1,4", "--max-drop", "0"], "--max-drop"),
    (["--concurrency", "1,4", "--max-drop", "-0.1"], "--max-drop"),
    (["--concurrency", "1,4", "--max-drop", "1"], "--max-drop"),
    (["--concurrency", "1,4", "--max-drop", "nan"], "--max-drop"),
    (["--concurrency", "2,4", "--max-drop", "0.05"], "concurrency 1"),
    (["--concurrency", "1", "--max-drop", "0.05"], "at least one more"),
    (["--concurrency", "1,4", "--max-drop", "0.05", "--alpha", "0.7"], "--alpha"),
    (["--concurrency", "1,4", "--alpha", "0.01"], "--max-drop"),
])
def test_the_command_refuses_before_any_run(tiny: Path, flags: list[str], said: str,
                                            tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                            ) -> None:
    assert said in refused_before_any_run(["sweep", str(tiny), *flags], tmp_path, capsys)
    assert not (tmp_path / "results" / "runs").exists()


def test_a_suite_entry_named_like_a_point_is_refused(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "tiny_clash.toml"
    path.write_text(tiny_variant("tiny_clash", floor=1.5, questions=8)
                    + '\n[[workloads]]\nname = "c4"\nshots = 0\nquestions = 4\n'
                      "[workloads.floors]\naccept_length = 1.5\n")
    code = main(["sweep", str(path), "--concurrency", "1,4", "--results",
                 str(tmp_path / "results")])
    err = capsys.readouterr().err
    assert code == 2 and "c4" in err, err


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(max_size=30))
def test_any_refused_list_exits_2_through_the_command(tiny: Path, tmp_path: Path, text: str
                                                     ) -> None:
    try:
        parse_concurrencies(text)
    except BadInput:
        pass
    else:
        return  # a valid list would run the suite
    results = tmp_path / "fuzz-results"
    assert main(["sweep", str(tiny), f"--concurrency={text}", "--results", str(results),
                 "--no-progress"]) == 2
    assert not (results / "runs").exists()
