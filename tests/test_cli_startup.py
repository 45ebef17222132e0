"""`harness --help` and `harness list` stay fast: no heavy library is imported at start-up.

Guards the import set, not the time (timings: benchmarks/bench_startup.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.commands import COMMANDS
from tests.shared import libraries_loaded_by

HEAVY = ("pydantic", "pandas", "numpy", "httpx", "matplotlib", "torch", "transformers", "rich",
         "huggingface_hub", "dflash", "scipy", "filelock", "packaging", "psutil",
         "aiohttp")  # fmt: skip

PROBE = """
import runpy, sys
heavy = sys.argv[1].split(",")
sys.argv = ["harness", *sys.argv[2:]]
try:
    runpy.run_module("harness", run_name="__main__")
except SystemExit as end:
    code = end.code
loaded = sorted({m.split(".")[0] for m in sys.modules} & set(heavy))
print("\\nIMPORTED:" + ",".join(loaded), "EXIT:" + str(code))
"""


def _imports(*argv: str, cache: Path) -> tuple[list[str], str, str]:
    env = dict(os.environ, HARNESS_CACHE=str(cache))
    done = subprocess.run([sys.executable, "-c", PROBE, ",".join(HEAVY), *argv],
                          capture_output=True, text=True, env=env, check=False)  # fmt: skip
    *printed, last = done.stdout.rstrip().splitlines()
    imported, code = last.removeprefix("IMPORTED:").split(" EXIT:")
    return [m for m in imported.split(",") if m], code, "\n".join(printed)


@pytest.mark.parametrize("argv", [("--help",), ("list",), ("compare", "--help"),
                                  ("run", "--help"), ("no-such-command",), ()])
def test_start_up_imports_no_heavy_library(argv: tuple[str, ...], tmp_path: Path) -> None:
    _imports("list", cache=tmp_path)  # `list` validates each suite once, then reads its cache
    imported, _, _ = _imports(*argv, cache=tmp_path)
    assert imported == [], f"harness {' '.join(argv)} imported {imported}"


def test_a_runs_command_loads_no_plotting_library() -> None:
    """`harness run` is started by every test and CI job that measures: its command module
    loads matplotlib and pandas only when a figure is drawn (harness.run.recorded), never
    to measure (about 0.7 s of every run's start)."""
    assert libraries_loaded_by("harness.commands.run", {"matplotlib", "pandas"}) == []


def test_list_from_its_cache_prints_what_validation_prints(tmp_path: Path) -> None:
    cold = _imports("list", cache=tmp_path)
    warm = _imports("list", cache=tmp_path)
    assert "pydantic" in cold[0] and warm[0] == []
    assert cold[1:] == warm[1:] and "gemma4_dflash_31b" in warm[2]


def test_every_command_is_installed() -> None:
    probe = "from harness.cli import build_parser; print(','.join(sorted(build_parser()[1])))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True).stdout  # fmt: skip
    assert out.strip().split(",") == sorted(COMMANDS)


def test_help_lists_exit_codes() -> None:
    out = subprocess.run([sys.executable, "-m", "harness", "--help"], capture_output=True,
                         text=True, check=True).stdout
    flat = " ".join(out.split())  # argparse wraps the epilog
    for code in ("0 pass", "1 below a floor", "2 bad input", "3 engine", "4 skipped"):
        assert code in flat


def test_argparse_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    from harness.cli import main

    with pytest.raises(SystemExit) as end:
        main(["no-such-command"])
    assert end.value.code == 2
    assert "invalid choice: 'no-such-command'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as end:
        main(["compare", "only-one-side"])
    assert end.value.code == 2
    assert "the following arguments are required: b" in capsys.readouterr().err


def test_list_cache_misses_when_a_suite_changes(tmp_path: Path) -> None:
    from tests.fixtures.suites_and_host import MINIMAL_SUITE

    folder = tmp_path / "suites"
    folder.mkdir()
    (folder / "tiny.toml").write_text(MINIMAL_SUITE)
    args = ("list", "--suites-dir", str(folder))
    assert _imports(*args, cache=tmp_path)[1] == "0"
    imported, code, out = _imports(*args, cache=tmp_path)
    assert imported == [] and code == "0" and "reference" in out
    (folder / "tiny.toml").write_text(MINIMAL_SUITE.replace("accept_length = 2.0", ""))
    imported, code, out = _imports(*args, cache=tmp_path)
    assert "pydantic" in imported and code == "2" and "INVALID:" in out


def _readme_exit_codes() -> dict[int, str]:
    import re

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    table = readme.split("## Exit codes", 1)[1].split("\n\n", 2)[1]
    return {int(m.group(1)): m.group(2).strip()
            for m in re.finditer(r"^\| (\d+) \| (.+) \|$", table, re.M)}


def test_help_and_readme_give_the_same_exit_codes() -> None:
    """Issue 20, case 11: `harness --help` lists every code README lists (6 and 7 too), in
    README's words; the bisect's own codes are the ones it returns."""
    from harness.errors import EXIT_CODE_MEANINGS, ExitCode
    from harness.run.exit_codes import bisect_exit

    out = subprocess.run([sys.executable, "-m", "harness", "--help"], capture_output=True,
                         text=True, check=True).stdout
    flat = " ".join(out.split())
    readme = _readme_exit_codes()
    assert readme == EXIT_CODE_MEANINGS
    assert {6, 7, 130} <= set(readme) and {int(c) for c in ExitCode} <= set(readme)
    assert set(EXIT_CODE_MEANINGS) == set(ExitCode)  # one enum: every code a member
    assert (bisect_exit("no difference"), bisect_exit("not narrowed")) == (6, 7)
    for code, meaning in readme.items():
        assert f"{code} {meaning}" in flat, code


def test_run_help_names_every_workload_kind() -> None:
    from harness.suite.model import WORKLOAD_KINDS

    out = subprocess.run([sys.executable, "-m", "harness", "run", "--help"],
                         capture_output=True, text=True, check=True).stdout
    flat = " ".join(out.split()).lower()
    names = {"gsm8k": "gsm8k", "spec_bench": "spec-bench", "humaneval": "humaneval",
             "jsonl": "jsonl"}
    assert set(WORKLOAD_KINDS) == set(names)
    for kind in WORKLOAD_KINDS:
        assert names[kind] in flat, kind


def test_readme_commands_are_the_cli_s() -> None:
    import re

    from harness.commands import COMMANDS

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    table = readme.split("## Commands", 1)[1].split("\n\n", 2)[1]
    named = set(re.findall(r"(?:harness |/ )`?(\w+)", table)) | set(
        re.findall(r"`harness (\w+)", table))
    assert set(COMMANDS) <= named | {"list", "show", "validate"}
    assert {name for name in named if name in COMMANDS} == set(COMMANDS)
