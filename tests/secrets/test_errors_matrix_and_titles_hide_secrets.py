"""Secrets through the other doors (issue 20, case 1): build specs with URL credentials in
error messages (the CLI's line, JUnit's text), the GitHub matrix, plot titles, compare's
side names; the recorded verdict reasons."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.cli import main

TOKEN = "ghp_PLANTEDtoken123"
SPEC = f"git+https://oauth2:{TOKEN}@github.com/org/sglang@main#subdirectory=python"


def test_a_build_spec_s_credentials_stay_out_of_error_messages(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from harness.builds import parse_build_spec
    from harness.errors import BadInput

    # an SGLang spec for a reference-engine suite: exit 2 quoting the spec
    assert main(["run", "tiny_dflash_cpu", "--dry-run", "--sglang", SPEC]) == 2
    err = capsys.readouterr().err
    assert "is an SGLang build" in err and TOKEN not in err and "oauth2:<redacted>@" in err
    # the exception itself (what pytest's JUnit report prints) carries no secret either
    for spec, engine in ((SPEC, "reference"), (f"sglang @ {SPEC} ; junk[", "sglang")):
        with pytest.raises(BadInput) as caught:
            parse_build_spec(spec, None, engine=engine)
        assert TOKEN not in str(caught.value)


def test_the_matrix_refuses_a_spec_with_credentials(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["matrix", "--build", f"main={SPEC}"]) == 2
    captured = capsys.readouterr()
    assert "may not carry credentials" in captured.err
    assert TOKEN not in captured.out + captured.err


def test_plot_titles_and_compare_sides_hide_credentials(tmp_path: Path) -> None:
    from harness.analysis import plots
    from harness.analysis.sides import _build_name
    from harness.results.readers import read_run
    from tests.results.records import make_run

    run_dir = make_run(tmp_path / "results", spec=SPEC)  # e.g. written by an older harness
    figure = plots.run_figure(read_run(run_dir))
    titles = [figure._suptitle.get_text()] + [a.get_title() for a in figure.axes]
    assert TOKEN not in " ".join(titles) and "<redacted>" in titles[0]
    row = {"build.spec": SPEC, "build.engine": "sglang", "build.version": None}
    assert TOKEN not in _build_name(row)
