"""Issue 31: what a newcomer types and reads. A mistyped flag gets the subcommand's usage
and the nearest flag; runs are named by their short id; `show` speaks TOML; `list` keeps
its columns; the dry run says "measured here" once; the categories figure names only the
lines it draws; `nox -s tests -- ARGS` adds to its defaults."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import pytest

from harness.cli import main
from harness.results.layout import RUN_PNG
from tests.results.records import make_run

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("typed", "meant"), [("--dry_run", "--dry-run"),
                                              ("--dryrun", "--dry-run"),
                                              ("--no_plot", "--no-plot"),
                                              ("--sequentail", "--sequential")])
def test_a_mistyped_flag_gets_the_subcommands_usage_and_the_nearest_flag(
        typed: str, meant: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as end:
        main(["run", "tiny_dflash_cpu", typed])
    assert end.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: harness run ")  # the subcommand's usage, not harness's
    assert f"unrecognized arguments: {typed} (did you mean {meant}?)" in err


def test_an_unknown_argument_with_no_near_flag_names_no_flag(
        capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as end:
        main(["compare", "a", "b", "c"])
    assert end.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: harness compare ")
    assert "unrecognized arguments: c\n" in err and "did you mean" not in err


def test_compare_and_plot_take_a_runs_short_id(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    results = tmp_path / "results"
    a, b = make_run(results, 2.4, seed=1), make_run(results, 2.6, seed=2)
    id_a, id_b = (folder.name.rsplit("-", 1)[1] for folder in (a, b))
    assert main(["compare", id_a, id_b, "--results", str(results), "--json"]) == 0
    import json

    compared = json.loads(capsys.readouterr().out)
    by_path = main(["compare", str(a), str(b), "--results", str(results), "--json"])
    assert by_path == 0
    same = json.loads(capsys.readouterr().out)
    assert compared["difference"] == same["difference"]
    # a unique prefix, and the folder's own name
    assert main(["plot", id_a[:6], "--results", str(results)]) == 0
    assert capsys.readouterr().out.strip() == str(a / "accept_length.png")
    assert main(["plot", a.name, "--results", str(results)]) == 0


def test_an_ambiguous_short_id_lists_the_runs(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.commands.run_ids import run_by_id
    from harness.errors import BadInput

    results = tmp_path / "results"
    ids = iter(["abcd1234", "abcd5678", "0123beef"])
    monkeypatch.setattr("harness.results.record.new_run_id", lambda: next(ids))
    first, second, third = (make_run(results, 2.5, seed=i) for i in range(3))
    with pytest.raises(BadInput, match=r"2 runs under .* have an id starting so: .*give more"):
        run_by_id("abcd", results)
    assert run_by_id("abcd5", results) == second
    assert run_by_id("0123beef", results) == third
    with pytest.raises(BadInput, match="ffff: no run with that id under"):
        run_by_id("ffff", results)
    assert run_by_id("tiny_dflash_cpu", results) is None  # a suite name is no id
    assert run_by_id(str(first), results) is None  # a path is a path
    (results / "runs" / "cafe").mkdir()
    assert run_by_id("cafe", results) is None  # a suite of that name: the suite


def test_show_prints_toml_that_loads_back_as_the_same_suite(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from harness.suite.model import load_suite

    for name in ("tiny_standalone_sglang_cpu", "tiny_spec_bench_cpu", "gemma4_dflash_31b"):
        assert main(["show", name, "--results", str(tmp_path)]) == 0
        out = capsys.readouterr().out
        assert "None" not in out and "True" not in out and "False" not in out
        printed = tmp_path / f"{name}.toml"
        printed.write_text(out)
        tomllib.loads(out)  # valid TOML, the header and calibration lines as comments
        again = load_suite(printed).suite.model_dump(mode="json")
        assert again == load_suite(name).suite.model_dump(mode="json")


def test_list_keeps_its_columns_whatever_the_names(tmp_path: Path) -> None:
    from harness.suite.listing import format_rows

    rows = [(["tiny_dflash_reference_uniform_cpu", "reference", "CPU", "", "one " * 30], False),
            (["short", "sglang", "2 x H100/H200", "nightly", "two"], False),
            ("broken INVALID: no such field", True)]
    lines = format_rows(rows)
    starts = [line.index(word) for line, word in zip(lines, (" reference ", " sglang "),
                                                      strict=False)]
    assert starts[0] == starts[1] > len("tiny_dflash_reference_uniform_cpu")
    assert lines[2] == "broken INVALID: no such field"
    wrapped = format_rows(rows, width=100)
    assert all(len(line) <= 100 for line in wrapped)
    head = wrapped[0].index("one")
    assert wrapped[1].startswith(" " * head) and wrapped[1].strip().startswith("one")


def test_shipped_list_columns_line_up(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    engines = {line.index(" reference ") if " reference " in line else
               line.index(" sglang ") if " sglang " in line else line.index(" vllm ")
               for line in lines}
    assert len(engines) == 1


def test_the_dry_run_says_measured_here_once() -> None:
    from harness.run.dry_run import baseline_line
    from harness.suite.entries import Baseline

    said = Baseline(label="a", accept_length=3.8, external=False,
                    source="measured here: the reference engine")
    unsaid = Baseline(label="b", accept_length=3.2, external=False,
                      source="benchmarks/reference_table.py")
    external = Baseline(label="c", accept_length=5.6, metric="server_avg", external=True,
                        source="SGLang's test_dflash.py")
    assert baseline_line(said, "server_avg").count("measured here") == 1
    assert "(server_avg, measured here) benchmarks" in baseline_line(unsaid, "server_avg")
    assert "(server_avg, external) SGLang" in baseline_line(external, "per_request")


def test_the_categories_key_names_the_dashed_line_only_when_drawn(tmp_path: Path) -> None:
    from harness.analysis.plot_categories import categories_figure
    from harness.results.readers import read_run

    run_dir = make_run(tmp_path / "results", 2.5)
    record = read_run(run_dir)
    from harness.results.record import CategoryResult

    record.measurement.categories = {"qa": CategoryResult(
        n_prompts=5, n_requests=5, accept_length=2.5, accept_length_ci=(2.2, 2.8))}
    assert "dashed" not in categories_figure(record).axes[0].get_title()
    record.suite.document["floors"]["categories"] = {"qa": {"accept_length": 2.0}}
    assert "dashed: category floor" in categories_figure(record).axes[0].get_title()


def _noxfile_tests_args() -> object:
    """`tests_args` of the noxfile, run without nox (the noxfile imports it at the top)."""
    tree = ast.parse((ROOT / "noxfile.py").read_text())
    wanted = [node for node in tree.body
              if (isinstance(node, ast.FunctionDef) and node.name == "tests_args")
              or (isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "")
                  == "TESTS_ARGS")]
    namespace: dict[str, object] = {}
    exec(compile(ast.Module(body=wanted, type_ignores=[]), "noxfile.py", "exec"), namespace)
    return namespace["tests_args"]


def test_nox_tests_arguments_add_to_the_defaults() -> None:
    tests_args = _noxfile_tests_args()
    default = tests_args([])
    assert default[:2] == ["-n", "4"] and "tests/sglang_cpu" in default
    added = tests_args(["-k", "show"])
    assert added[:len(default)] == default and added[-2:] == ["-k", "show"]
    # CI selects the end-to-end cases too with a `-m` of its own, after the session's: the
    # last `-m` is the one pytest keeps
    both = tests_args(["-m", "not gpu_rehearsal"])
    marks = [both[i + 1] for i, arg in enumerate(both) if arg == "-m"]
    assert marks == ["not e2e and not gpu_rehearsal", "not gpu_rehearsal"]
    serial = tests_args(["-p", "no:xdist", "tests/run"])
    assert "-n" not in serial and serial[-3:] == ["-p", "no:xdist", "tests/run"]
    assert "--ignore" in serial  # the session's ignores still hold


def test_a_run_names_the_pngs_it_drew(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from harness.analysis import plots
    from harness.commands.run import drawn_plots

    main_dir, entry_dir = (make_run(tmp_path / "results", 2.5, seed=i) for i in range(2))
    outcome = SimpleNamespace(run_dir=main_dir, entries=[
        SimpleNamespace(run_dir=main_dir), SimpleNamespace(run_dir=entry_dir)])
    assert drawn_plots(outcome) == []  # --no-plot: nothing named
    plots.plot_run(main_dir)
    plots.plot_run(entry_dir)
    assert drawn_plots(outcome) == [main_dir / RUN_PNG, entry_dir / RUN_PNG]


@pytest.mark.parametrize(("argv", "typed", "usage", "meant"), [
    (["rnu", "tiny_dflash_cpu"], "rnu", "usage: harness [", "run"),
    (["reference", "biuld"], "biuld", "usage: harness reference ", "build"),
])
def test_a_mistyped_command_gets_the_nearest_one(argv: list[str], typed: str, usage: str,
                                                 meant: str,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as end:
        main(argv)
    assert end.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(usage) and f"invalid choice: '{typed}'" in err
    assert err.rstrip().endswith(f"(did you mean {meant}?)")
