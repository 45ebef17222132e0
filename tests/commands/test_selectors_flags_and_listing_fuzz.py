"""Issue 31's new parsers and writers, fuzzed: a run selector, a mistyped flag, `show`'s
TOML and `list`'s rows. Each either does its job or says what is wrong (BadInput)."""

from __future__ import annotations

import argparse
import tomllib

import tomli_w
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from harness.cli import nearest_flag
from harness.commands.run_ids import run_by_id
from harness.commands.suites import toml_text
from harness.errors import BadInput, SuiteError
from harness.suite.listing import format_rows
from tests.fixtures.suites_and_host import FULL_SGLANG_SUITE

TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=60)


@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(selector=st.one_of(TEXT, st.from_regex(r"\A[0-9a-f]{1,12}\Z")))
def test_any_selector_is_a_run_none_or_bad_input(tmp_path_factory, selector: str) -> None:
    results = tmp_path_factory.mktemp("results")
    try:
        found = run_by_id(selector, results)
    except BadInput as error:
        assert selector in error.message
    else:
        assert found is None


@settings(deadline=None)
@given(extras=st.lists(TEXT, min_size=1, max_size=3))
@example(extras=["-L"])  # found by hypothesis: the nearest flag is argparse's own --help
def test_any_unknown_argument_gets_a_flag_of_the_parser_or_none(extras: list[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dry-run", action="store_true")
    parser.add_argument("--results")
    hint = nearest_flag(extras, parser)
    # argparse adds --help to every parser: `-L` reads as `--l`, nearest to it
    assert hint in (None, "--dry-run", "--results", "--help")


@settings(deadline=None)  # the first example imports the suite model
@given(description=TEXT, arg=TEXT, value=TEXT)
def test_show_prints_toml_that_loads_back_whatever_the_strings(description: str, arg: str,
                                                               value: str) -> None:
    from harness.suite.model import parse_suite

    document = tomllib.loads(FULL_SGLANG_SUITE)
    document["description"] = description
    document["engine"]["extra_args"] = ["--trust-remote-code", arg]
    document["engine"]["env"] = {"SGLANG_FOO": value}
    try:
        suite, _ = parse_suite(tomli_w.dumps(document), "fuzz.toml")
    except SuiteError:  # a suite the schema refuses is not show's to print
        return
    shown = toml_text(suite.model_dump(mode="json"))
    again, _ = parse_suite(shown, "again.toml")
    assert again.model_dump(mode="json") == suite.model_dump(mode="json")


@settings(deadline=None)
@given(rows=st.lists(st.lists(TEXT, min_size=5, max_size=5), min_size=1, max_size=6),
       width=st.integers(min_value=20, max_value=200))
def test_list_rows_keep_their_columns(rows: list[list[str]], width: int) -> None:
    clean = [[" ".join(cell.split()) for cell in row] for row in rows]  # one-line cells
    lines = format_rows([(row, False) for row in clean])
    assert len(lines) == len(clean)
    offset = max(len(row[0]) for row in clean) + 2  # the engine column, after the widest name
    for line, row in zip(lines, clean, strict=True):
        assert line[offset:].startswith(row[1])
    head = len(lines[0]) - len(clean[0][4])
    wrapped = format_rows([(row, False) for row in clean], width)
    if width - head >= 30:
        assert all(len(line) <= width for line in wrapped)
