"""`harness grid`'s launches and cells, before any server: the cells that need the same
launch line share one launch, prefix caching on and off are two, each with the engine's
own flag on its launch line (SGLang's `--disable-radix-cache`, vLLM's
`--enable-prefix-caching` / `--no-enable-prefix-caching`) and passing the adapter's own
flag check; each cell's workload asks its category's prompts behind its tier's prefix,
the same questions on every tier."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from harness.engines.registry import adapter_for
from harness.protocols.grid import plan_launches
from harness.results.grid import read_grid
from harness.run.plan import check_suite
from harness.suite.checkpoints import Models
from harness.suite.model import LoadedSuite, parse_suite
from harness.suite.schema import document_sha256
from harness.workloads import prepare
from harness.workloads.gsm8k import few_shot_prefix, load_train
from tests.suite.test_grid_refuses_bad_input import GOOD, SHIPPED, suite_text

ROOT = Path(__file__).resolve().parents[2]
CACHED = {**GOOD, "prefix_caching": ["on", "off"],
          "reference": {"tier": "short", "concurrency": 1, "prefix_caching": "on"}}


def loaded(text: str) -> LoadedSuite:
    suite, document = parse_suite(text, "grid.toml")
    return LoadedSuite(suite=suite, path=Path("grid.toml"), sha256=document_sha256(document),
                       document=document)


@pytest.mark.parametrize(("base", "on", "off"), [
    ("tiny_dflash_vllm_cpu.toml", ["--enable-prefix-caching"], ["--no-enable-prefix-caching"]),
    ("tiny_ngram_sglang_cpu.toml", [], ["--disable-radix-cache"]),
])
def test_prefix_caching_on_and_off_are_two_launches(base: str, on: list[str],
                                                    off: list[str]) -> None:
    grid = loaded(suite_text(CACHED, ROOT / "suites" / base))
    launches = plan_launches(grid)
    assert [launch.caching for launch, _ in launches] == ["on", "off"]
    adapter = adapter_for(grid.suite.engine.kind)
    own = list(grid.suite.engine.extra_args)
    for (launch, derived), flags in zip(launches, (on, off), strict=True):
        assert launch.flags == flags
        assert list(derived.suite.engine.extra_args) == [*own, *flags]
        # every tier, category and concurrency of this setting on this one server
        assert len(launch.cells) == 2 * 2 * 2
        assert {run.cell.prefix_caching for run in launch.cells} == {launch.caching}
        assert "grid" not in derived.document
        check_suite(derived)  # the adapter's own flag check, as a run makes it
        command = adapter.launch_command(derived.suite, "python", "127.0.0.1", 30000,
                                         models=Models("org/target", "org/draft"))
        for flag in flags:
            assert flag in command
        other = off if flags == on else on
        assert not set(other) & set(command)


def test_one_launch_when_prefix_caching_is_not_swept() -> None:
    launches = plan_launches(loaded(SHIPPED.read_text(encoding="utf-8")))
    [(launch, _)] = launches
    assert launch.caching is None and launch.flags == []
    names = [run.cell.name for run in launch.cells]
    assert names == ["short-gsm8k-c1", "short-gsm8k-c2", "short-qa-c1", "short-qa-c2",
                     "long-gsm8k-c1", "long-gsm8k-c2", "long-qa-c1", "long-qa-c2"]
    assert [run.series for run in launch.cells] == [f"tiny_dflash_grid_cpu.{n}" for n in names]
    # each cell judged by the suite's accept-length floor in its definition
    assert all(run.floors.metric == "server_avg" and run.floors.accept_length == 1.0
               for run in launch.cells)


def test_a_tier_is_the_same_questions_behind_a_prefix() -> None:
    [(_, derived)] = plan_launches(loaded(SHIPPED.read_text(encoding="utf-8")))
    workloads = {entry.name: entry for entry in derived.suite.workloads}
    prefix = few_shot_prefix(load_train().rows, 1)
    for category in ("gsm8k", "qa"):
        short = prepare(workloads[f"short-{category}-c1"]).prompts
        long = prepare(workloads[f"long-{category}-c1"]).prompts
        assert len(short) == len(long) == 4
        assert [p.question_index for p in short] == [p.question_index for p in long]
        assert {p.category for p in short} == {category}
        for s, lo in zip(short, long, strict=True):
            assert lo.text == prefix + s.text  # the tier adds exactly its worked examples
            assert not s.text.startswith(prefix[:40])
    # the request settings are the suite's [workload]'s; the concurrency the cell's
    cell = workloads["long-qa-c2"]
    assert (cell.max_tokens, cell.temperature, cell.concurrency, cell.turns) == (32, 0.0, 2, 1)


def test_a_host_the_suite_does_not_fit_skips_the_grid(tmp_path: Path) -> None:
    """A GPU suite on this CPU host: every launch skipped (exit 4), the grid's record
    says so, and no gate is judged on cells that were never measured."""
    suite = tmp_path / "gpu_grid.toml"
    suite.write_text(suite_text(CACHED, ROOT / "suites" / "qwen3_8b_dflash.toml"))
    results = tmp_path / "results"
    done = subprocess.run([sys.executable, "-m", "harness", "grid", str(suite), "--results",
                           str(results), "--no-progress"], capture_output=True, text=True,
                          cwd=ROOT, timeout=300)
    assert done.returncode == 4, done.stdout + done.stderr
    [folder] = list((results / "grids").glob("*/*"))
    grid = read_grid(folder)
    assert grid.status == "skipped" and grid.gate is None and grid.reasons
    assert [launch.prefix_caching for launch in grid.launches] == ["on", "off"]
    assert [launch.flags for launch in grid.launches] == [[], ["--disable-radix-cache"]]
    assert not list(results.glob("runs/*/*/run.json"))
