"""Runtime meets audit (harness/run/runtime_attention.py): what the kernel received per
draft layer against the audit's table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from harness.errors import EngineError
from harness.results.record import LayerRow, RuntimeLayerRow
from harness.run.runtime_attention import check, differences, read_runtime

AUDIT = [LayerRow(index=i, layer_type="sliding_attention", window=16, causal=True)
         for i in range(4)] + [LayerRow(index=4, layer_type="full_attention", causal=False)]


def _lines(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _kernel(layer: int, causal: bool, window: int | None, model: str = "dflash",
            kernel: str = "extend") -> dict:
    return {"pid": 1, "model": model, "layer": layer, "kernel": kernel, "causal": causal,
            "window": window}


def test_agreement(tmp_path: Path) -> None:
    record = _lines(tmp_path / "a.jsonl", [
        *[_kernel(i, True, 16) for i in range(4)], _kernel(4, False, None),
        _kernel(0, True, None, model="qwen3"),  # the target's layers are not the draft's
        _kernel(2, True, 16)])  # a second process recording the same layer: one row
    runtime, found = check(record, AUDIT)
    assert found == []
    assert runtime == [RuntimeLayerRow(index=i, kernel="extend", causal=True, window=16)
                       for i in range(4)] + [RuntimeLayerRow(index=4, kernel="extend",
                                                             causal=False, window=None)]


def test_a_forced_difference_names_the_layer(tmp_path: Path) -> None:
    """The seed's regression as the kernel would see it: layer 1 bidirectional."""
    record = _lines(tmp_path / "a.jsonl", [
        _kernel(0, True, 16), _kernel(1, False, 16), _kernel(2, True, 16),
        _kernel(3, True, 8), _kernel(4, False, None)])
    _, found = check(record, AUDIT)
    assert found == [
        "draft layer 1: the extend kernel received bidirectional, window 16; the audit says "
        "causal, window 16",
        "draft layer 3: the extend kernel received causal, window 8; the audit says causal, "
        "window 16"]


def test_missing_and_unknown_layers(tmp_path: Path) -> None:
    found = differences(AUDIT, [RuntimeLayerRow(index=i, kernel="extend", causal=True,
                                                window=16) for i in (0, 1, 2, 3, 7)])
    assert found == [
        "draft layer 4: the attention kernel recorded no call (the audit says bidirectional, "
        "no window)",
        "draft layer 7: the attention kernel was called for it, but the audit's table has "
        "no such layer"]


def test_decode_calls_are_judged_by_their_window() -> None:
    rows = [RuntimeLayerRow(index=i, kernel="extend", causal=True, window=16) for i in range(4)]
    rows += [RuntimeLayerRow(index=4, kernel="extend", causal=False, window=None),
             RuntimeLayerRow(index=4, kernel="decode", causal=True, window=None)]
    assert differences(AUDIT, rows) == []
    rows[-1] = RuntimeLayerRow(index=4, kernel="decode", causal=True, window=16)
    assert differences(AUDIT, rows) == [
        "draft layer 4: the decode kernel received causal, window 16; the audit says "
        "bidirectional, no window"]


def test_nothing_recorded_or_nothing_to_compare(tmp_path: Path) -> None:
    _, found = check(tmp_path / "absent.jsonl", AUDIT)
    assert found and "recorded no call of the draft's layers" in found[0]
    record = _lines(tmp_path / "a.jsonl", [_kernel(0, True, 16)])
    _, found = check(record, None)
    assert found == ["no audit table for this build to compare the kernel's calls with"]


@given(st.text(max_size=80))
@example("\r")  # a line end only universal newlines see: still line 2, as written
@example("0\x1c1")
def test_a_bad_line_is_an_error_naming_it(tmp_path_factory: pytest.TempPathFactory,
                                          text: str) -> None:
    path = tmp_path_factory.mktemp("r") / "a.jsonl"
    path.write_text(json.dumps(_kernel(0, True, 16)) + "\n" + text.replace("\n", " ") + "\n")
    try:
        rows = read_runtime(path)
    except EngineError as error:
        assert f"{path}:2: not a kernel record line" in str(error)
    else:  # blank, or a JSON line of another model
        assert rows == [RuntimeLayerRow(index=0, kernel="extend", causal=True, window=16)]


def test_kernel_calls_are_checked_against_the_suites_expected_layers() -> None:
    from types import SimpleNamespace

    from harness.results.record import RuntimeLayerRow
    from harness.run.runtime_attention import expected_differences

    expected = [SimpleNamespace(causal=True, window=16), SimpleNamespace(causal=False,
                                                                        window=None)]
    suite = SimpleNamespace(draft=SimpleNamespace(expected_layers=expected))
    runtime = [RuntimeLayerRow(index=0, kernel="extend", causal=False, window=16),
               RuntimeLayerRow(index=1, kernel="extend", causal=False, window=None)]
    assert expected_differences(suite, runtime) == [
        "draft layer 0: the extend kernel received bidirectional, window 16; the suite "
        "expects causal, window 16 (at run time)"]
    suite.draft.expected_layers = None
    assert expected_differences(suite, runtime) == []
