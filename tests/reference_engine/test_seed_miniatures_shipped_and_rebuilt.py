"""The shipped seed miniatures are the ones every machine serves; the Muse Glimmer decoder
the build trains keeps its cache exact. That their build is deterministic is checked with
the reference build's, in the same two build processes
(test_checkpoints_reproducible.py::test_reduced_seed_builds_are_bit_identical)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.errors import BadInput, EngineError
from reference_engine.checkpoints import (
    PAIRS,
    SEED_DIR,
    build_pair,
    pair_dir,
    shipped_pair,
    verify_shipped_pair,
)
from reference_engine.recipe import recipe_for


@pytest.mark.parametrize("pair", PAIRS)
def test_shipped_files_match_their_manifest(pair: str) -> None:
    assert verify_shipped_pair(pair) == []
    target, draft = shipped_pair(pair)
    manifest = json.loads((pair_dir(pair) / "MANIFEST.json").read_text())
    assert manifest["recipe"] == recipe_for(pair).digest()
    assert {"target/model.safetensors", "target/config.json", "draft/model.safetensors",
            "draft/config.json"} <= set(manifest["files"])
    size = sum(path.stat().st_size for path in pair_dir(pair).rglob("*") if path.is_file())
    assert size < 8 * 2**20  # small enough to ship
    recorded = json.loads((pair_dir(pair) / "recipe.json").read_text())
    assert recorded["digest"] == recipe_for(pair).digest()
    assert json.loads((draft / "config.json").read_text())["layer_types"]
    assert (target / "tokenizer.json").is_file()


def test_a_changed_byte_is_named(tmp_path: Path) -> None:
    shutil.copytree(SEED_DIR, tmp_path / "seed")
    with (tmp_path / "seed" / "gemma4" / "draft" / "model.safetensors").open("r+b") as handle:
        handle.seek(200)
        byte = handle.read(1)
        handle.seek(200)
        handle.write(bytes([byte[0] ^ 1]))
    problems = verify_shipped_pair("gemma4", tmp_path / "seed")
    assert len(problems) == 1 and "draft/model.safetensors" in problems[0]
    assert verify_shipped_pair("muse_glimmer", tmp_path / "seed") == []
    with pytest.raises(EngineError, match=r"draft/model\.safetensors"):
        shipped_pair("gemma4", tmp_path / "seed")
    (tmp_path / "seed" / "muse_glimmer" / "target" / "tokenizer.json").unlink()
    assert any("target/tokenizer.json" in p for p in verify_shipped_pair("muse_glimmer",
                                                                    tmp_path / "seed"))


def test_an_unknown_pair_is_bad_input(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match="no seed pair 'llama'; known: gemma4, muse_glimmer"):
        build_pair("llama", sys.executable, tmp_path / "out")
    done = subprocess.run([sys.executable, "-m", "harness", "reference", "build", "--pair",
                           "llama"], capture_output=True, text=True, check=False)
    assert done.returncode == 2 and "invalid choice: 'llama'" in done.stderr
    assert "Traceback" not in done.stderr


def test_the_muse_glimmer_cache_gives_the_uncached_greedy_tokens() -> None:
    torch = pytest.importorskip("torch")
    from reference_engine.muse_glimmer_model import MuseGlimmerLM
    from reference_engine.recipe import MUSE_GLIMMER, with_overrides
    from reference_engine.seed_configs import TokenIds, muse_glimmer_text

    torch.manual_seed(0)
    recipe = with_overrides(MUSE_GLIMMER, {"target_sliding_window": 4})
    model = MuseGlimmerLM(muse_glimmer_text(recipe, TokenIds(64, 0, 1, 2))).eval()
    for parameter in model.parameters():
        parameter.data.normal_(0, 0.3)
    prompt = torch.randint(0, 64, (3, 7), generator=torch.Generator().manual_seed(1))
    expected = prompt
    with torch.no_grad():
        for _ in range(10):  # the window (4) is passed: the cache must apply it too
            logits, _ = model(expected)
            expected = torch.cat([expected, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
    assert torch.equal(model.greedy(prompt, 10), expected)
