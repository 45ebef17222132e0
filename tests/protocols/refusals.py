"""What the tests of each protocol command's refused input share: the tiny suite they
refuse around and the command refused before anything runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.cli import main
from tests.tiny_variants import tiny_variant


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
