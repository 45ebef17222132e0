"""A Ctrl-C that lands while run.json is written keeps the verdict already reached."""
from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from harness.results import writer
from harness.results.layout import RUN_FILE
from harness.results.record import Verdict
from harness.run.runner import RunOptions, _fail_unfinished, _new_run
from harness.suite.model import load_suite, suite_entries

SUITE = Path(__file__).resolve().parents[2] / "suites" / "tiny_dflash_cpu.toml"


@pytest.mark.parametrize("cut", ["before the rename", "after the rename"])
def test_interrupt_during_the_write_keeps_the_verdict(cut: str, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    loaded = load_suite(SUITE)
    run = _new_run(suite_entries(loaded, None)[0], RunOptions(results_dir=tmp_path))
    # the signal arrives inside write_run, once: before run.json is in place, or just after
    if cut == "before the rename":
        monkeypatch.setattr(writer, "atomic_write_text", _first_call_raises(
            writer.atomic_write_text))
    else:
        monkeypatch.setattr(writer, "note_written", _first_call_raises(
            writer.note_written))
    with pytest.raises(KeyboardInterrupt):
        run.finish(Verdict(status="pass", reasons=["floor met"]))
    assert _fail_unfinished([run], KeyboardInterrupt()) == []  # nothing left unfinished
    written = json.loads((run.run_dir / RUN_FILE).read_text())
    assert written["verdict"]["status"] == "pass"
    assert written["verdict"]["reasons"] == ["floor met"]


def _first_call_raises(real: Callable[..., Any]) -> Callable[..., Any]:
    state = {"raised": False}

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if not state["raised"]:
            state["raised"] = True
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    return wrapper
