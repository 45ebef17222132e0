"""The redactor over arbitrary input (hypothesis): redacting twice is redacting once, and no
registered value survives it, in free text, command lines, environments and documents;
nor does a value split over two writes to a guarded stream."""

from __future__ import annotations

import io
import json
from datetime import timedelta
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness import secrets

# Pieces that sit at the edges of the patterns, mixed into arbitrary text.
FRAGMENTS = ["sk-", "sk-live-", "hf_", "ghp_", "AKIA", "eyJ", ".eyJ", "Bearer ", "Basic ",
             "Authorization: ", "https://", "http:/", "git+ssh://", "@", ":", "/", "?token=",
             "&sig=", "<", ">", "<redacted>", "redacted", "-----BEGIN RSA PRIVATE KEY-----",
             "-----END RSA PRIVATE KEY-----", "--api-key ", "--api-key=", "=", " ", "\n",
             "\"", "\\", "0123456789", "AbCdEfGhIjKlMnOp"]
SETTINGS = settings(max_examples=300, deadline=timedelta(seconds=5), derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])

values = st.lists(st.text(min_size=1, max_size=24), max_size=4)


def texts(registered: list[str]) -> st.SearchStrategy[str]:
    pieces = [st.text(max_size=10), st.sampled_from(FRAGMENTS)]
    if registered:
        pieces.append(st.sampled_from(registered))
    return st.lists(st.one_of(*pieces), max_size=14).map("".join)


def _fresh(planted: list[str]) -> None:
    secrets.forget()
    secrets.register(planted)


def _left(shown: str) -> list[str]:
    return [value for value in secrets.registered() if value in shown]


@SETTINGS
@given(st.data(), values)
def test_text(data: st.DataObject, planted: list[str]) -> None:
    _fresh(planted)
    text = data.draw(texts(planted))
    once = secrets.redact_text(text)
    assert secrets.redact_text(once) == once
    assert _left(once) == []


@SETTINGS
@given(st.data(), values)
def test_argv_and_env(data: st.DataObject, planted: list[str]) -> None:
    _fresh(planted)
    argv = data.draw(st.lists(texts(planted), max_size=6))
    once = secrets.redact_argv(argv)
    assert secrets.redact_argv(once) == once and len(once) == len(argv)
    assert _left("\0".join(once)) == []
    env = data.draw(st.dictionaries(texts(planted), texts(planted), max_size=4))
    shown = secrets.redact_env(env)
    assert secrets.redact_env(shown) == shown
    assert _left("\0".join(f"{k}\0{v}" for k, v in shown.items())) == []


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                max_size=4),
    max_leaves=20)


@SETTINGS
@given(st.data(), values)
def test_documents(data: st.DataObject, planted: list[str]) -> None:
    _fresh(planted)
    text = texts(planted)
    document: dict[str, Any] = {
        "engine": {"kind": data.draw(st.sampled_from(["sglang", "vllm", "reference", "x"])),
                   "env": data.draw(st.dictionaries(text, text, max_size=3)),
                   "extra_args": data.draw(st.lists(text, max_size=4))},
        "other": data.draw(json_values), "description": data.draw(text)}
    once = secrets.redact_document(document)
    assert secrets.redact_document(once) == once
    assert _left(json.dumps(once, ensure_ascii=False)) == []


@SETTINGS
@given(st.data(), values, st.integers(min_value=0, max_value=40))
def test_a_guarded_stream(data: st.DataObject, planted: list[str], cut: int) -> None:
    _fresh(planted)
    text = data.draw(texts(planted)) + "\n"
    sink = io.StringIO()
    stream = secrets.GuardedStream(sink)
    stream.write(text[:cut])
    stream.write(text[cut:])
    stream.flush()
    assert _left(sink.getvalue()) == []
