"""What the tests of each protocol command's refused input share: the tiny suite they
refuse around, the command refused before anything runs, a parser's value or refusal."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

from harness.cli import main
from harness.errors import BadInput
from tests.tiny_variants import tiny_variant

Parsed = TypeVar("Parsed")


def tiny_suite_file(folder: Path, name: str, questions: int) -> Path:
    """The tiny suite `name` (floor 1.5, `questions` questions) written to `folder`."""
    path = folder / f"{name}.toml"
    path.write_text(tiny_variant(name, floor=1.5, questions=questions))
    return path


def refused_before_any_run(command: list[str], folder: Path,
                           capsys: pytest.CaptureFixture[str]) -> str:
    """`harness COMMAND --results FOLDER/results --no-progress`: exit 2, no traceback; its
    stderr."""
    code = main([*command, "--results", str(folder / "results"), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err
    return err


def parsed_or_refused(parse: Callable[[], Parsed], named: str) -> Parsed | None:
    """What `parse()` gives, or None where it refused with a BadInput whose message starts
    with `named`."""
    try:
        return parse()
    except BadInput as error:
        assert error.message.startswith(named), error.message
        return None
