"""Property-based (issue 20, case 8): the suite loader (a file of any bytes, any mutation of
a shipped suite's text) and the build-spec parser (any text, mutations of valid specs)
give a valid object or one clean `BadInput` whose first line names the file or flag;
never another exception, never a hang (each example has a deadline)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.builds import BuildSpec, parse_build_spec
from harness.errors import BadInput
from harness.suite.model import LoadedSuite, load_suite
from tests.fixtures.suites_and_host import SHIPPED_SUITES

FUZZ = settings(max_examples=150, deadline=timedelta(seconds=5), derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
SHIPPED_TEXTS = [path.read_bytes() for path in SHIPPED_SUITES]


def _check_suite(folder: Path, text: bytes) -> None:
    path = folder / "fuzz.toml"
    path.write_bytes(text)
    try:
        loaded = load_suite(path)
    except BadInput as error:
        assert error.message.startswith(f"{path}:"), error.message
        return
    assert isinstance(loaded, LoadedSuite)


@FUZZ
@given(text=st.binary(max_size=300))
def test_suite_loader_on_any_bytes(tmp_path: Path, text: bytes) -> None:
    _check_suite(tmp_path, text)


@st.composite
def mutated_texts(draw: st.DrawFn) -> bytes:
    text = draw(st.sampled_from(SHIPPED_TEXTS))
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(0, len(text)))
        action = draw(st.sampled_from(["delete", "insert", "replace"]))
        size = draw(st.integers(1, 12))
        insert = draw(st.binary(max_size=6) | st.sampled_from(
            [b"=", b'"', b"[", b"]", b"\n", b"-1", b"1e400", b"nan", b"{", b"}", b","]))
        if action == "delete":
            text = text[:at] + text[at + size:]
        elif action == "insert":
            text = text[:at] + insert + text[at:]
        else:
            text = text[:at] + insert + text[at + len(insert):]
    return text


@FUZZ
@given(text=mutated_texts())
def test_suite_loader_on_mutated_shipped_suites(tmp_path: Path, text: bytes) -> None:
    _check_suite(tmp_path, text)


VALID_SPECS = ["sglang==0.5.23", "0.5.22", "git+https://github.com/sgl-project/sglang@v0.5.22"
               "#subdirectory=python", "reference:policy=fixed,noise=0.1",
               "reference:noise=0", "sglang @ git+https://h/x@abc"]


def _check_spec(spec: str, engine: str | None) -> None:
    try:
        parsed = parse_build_spec(spec, None, engine=engine)  # type: ignore[arg-type]
    except BadInput as error:
        first = error.message.splitlines()[0] if error.message else ""
        assert first.startswith("--sglang"), error.message
        return
    assert isinstance(parsed, BuildSpec)


@st.composite
def mutated_specs(draw: st.DrawFn) -> str:
    spec = draw(st.sampled_from(VALID_SPECS))
    at = draw(st.integers(0, len(spec)))
    insert = draw(st.text(max_size=4) | st.sampled_from(["@", "#", "=", ",", ":", "..", "\x00",
                                                         "/", " ", "==", "[x]"]))
    return spec[:at] + insert + spec[at + draw(st.integers(0, 3)):]


@pytest.mark.parametrize("engine", ["sglang", "reference", None])
@FUZZ
@given(spec=st.text(max_size=40) | mutated_specs())
def test_build_spec_parser(spec: str, engine: str | None) -> None:
    _check_spec(spec, engine)
