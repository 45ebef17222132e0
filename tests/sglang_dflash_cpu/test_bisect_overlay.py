"""`harness bisect` over a local SGLang history, with the real server on CPU
(`nox -s sglang_dflash_bisect_cpu`, not in `.ci/run`: 17-21 min on 2 shared cores).

The history (history.py) is the 0.5.23 wheel's package as the first commit, then six
harmless commits, the fourth reverting PR #34524's sliding-layer default. Every step is
a local checkout build, `REPO@SHA`, which on this CPU host is an overlay: the commit's
`python/sglang` over 0.5.23's CPU environment (harness/builds/overlay.py), with the
suite's test patch. The bisect must name the reverting commit.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.sglang_dflash_cpu.conftest import REPO, SUITE
from tests.sglang_dflash_cpu.history import REVERT_AT, make_history

# A step that stays undecided on the suite's 100 questions is not extended (that would
# measure GOOD again on 200): passed over like a skipped commit, which the test would see.
BISECT_ARGS = ("--max-prompts", "100")


@pytest.fixture(scope="module")
def bisected(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    folder = tmp_path_factory.mktemp("bisect")
    repo, shas, reverting = make_history(folder / "sglang")
    results = folder / "results"
    command = [sys.executable, "-m", "harness", "bisect", SUITE, "--good", f"{repo}@{shas[0]}",
               "--bad", f"{repo}@{shas[-1]}", "--results", str(results), *BISECT_ARGS]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=3 * 3600,
                          env={**os.environ, "HARNESS_SGLANG_DEVICE": "cpu"}, check=False)
    print(f"$ {' '.join(command)}\n{done.stderr}\n{done.stdout}")  # the measured output
    if done.returncode in (0, 7):  # how far a step's statistics separate here (docs)
        from tests.sglang_dflash_cpu.separation import render, separation

        print("\n".join(render(separation(results))))
    sessions = sorted((results / "bisect").glob("*/result.json"))
    result = json.loads(sessions[-1].read_text()) if sessions else {}
    return {"done": done, "shas": shas, "reverting": reverting, "result": result,
            "results": results}


def test_the_bisect_names_the_reverting_commit(bisected: dict[str, object]) -> None:
    done = bisected["done"]
    assert isinstance(done, subprocess.CompletedProcess)
    tail = done.stdout[-3000:] + done.stderr[-5000:]
    assert done.returncode == 0, tail
    result = bisected["result"]
    assert isinstance(result, dict)
    assert result["status"] == "found", tail
    assert result["first_bad"]["sha"] == bisected["reverting"], tail
    assert result["commits"] == 6 and result["skipped"] == [] and result["undecided"] == []
    assert f"first bad commit  {bisected['reverting']}" in done.stdout
    endpoints = result["endpoints"]
    assert endpoints["differ"] and endpoints["difference"] < 0  # the revert lowers it
    # the commit before the revert was measured like GOOD (or it is GOOD itself)
    assert result["before"]["sha"] in bisected["shas"][:REVERT_AT]


def test_every_step_ran_an_overlay_of_its_commit(bisected: dict[str, object]) -> None:
    results = bisected["results"]
    assert isinstance(results, Path)
    records = [json.loads(p.read_text()) for p in (results / "runs").rglob("run.json")]
    assert len(records) >= 3  # GOOD, BAD and at least one step
    trees: dict[str, str] = {}
    for record in records:
        build = record["build"]
        assert build["method"] == "overlay"
        assert build["base"]["spec"] == "sglang==0.5.23"
        assert build["build_key"] == build["base"]["key"]  # the release's environment
        assert build["git_sha"] in bisected["shas"]  # type: ignore[operator]
        assert build["source_hash"].startswith("sha256:")
        assert record["provenance"]["test_patches_sha256"]
        trees[build["git_sha"]] = build["source_hash"]
    assert len(set(trees.values())) == len(trees)  # another commit, another tree
