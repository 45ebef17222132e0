"""The shipped checkpoints are the ones every machine runs; the build that remakes them is
deterministic.

The full recipe takes about 4 minutes on 2 idle cores, too slow to build twice here:
determinism is shown on a reduced recipe that runs every stage of the build (tokenizer,
target, distillation, draft), and the full rebuild is `harness reference verify`. The seed
miniatures' reduced recipes are built in the same two processes (reduced_builds.py): a
reduced build computes for seconds, a process importing torch for about ten.

Two builds here, not one against a committed hash: a build is bit-identical on one machine
but not across CPU types (checkpoints.py), so a hash would hold only where it was made.
"""

from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from reference_engine.checkpoints import (
    PAIRS,
    SHIPPED_DIR,
    build,
    ensure_checkpoints,
    folder_hashes,
    is_complete,
    pair_dir,
    read_manifest,
    served_weights_sha256,
    verify_shipped,
)
from reference_engine.recipe import DEFAULT_RECIPE
from tests.reference_engine.conftest import ENGINE_PYTHON, engine_available

REDUCED_BUILDS = "tests.reference_engine.reduced_builds"


def test_shipped_files_match_their_manifest() -> None:
    assert is_complete(SHIPPED_DIR)
    manifest = read_manifest()
    assert manifest["recipe"] == DEFAULT_RECIPE.digest()
    assert verify_shipped() == []
    assert {"target/model.safetensors", "draft/model.safetensors",
            "target/tokenizer_config.json"} <= set(manifest["files"])
    size = sum(path.stat().st_size for path in SHIPPED_DIR.rglob("*") if path.is_file())
    assert size < 12 * 2**20
    recorded = json.loads((SHIPPED_DIR / "recipe.json").read_text())
    assert recorded["digest"] == DEFAULT_RECIPE.digest()
    config = json.loads((SHIPPED_DIR / "target" / "tokenizer_config.json").read_text())
    assert config["chat_template"] == DEFAULT_RECIPE.chat_template


def test_the_default_lookup_serves_the_shipped_files(tmp_path: Path) -> None:
    # No build is attempted: the engine python does not even exist.
    target, draft = ensure_checkpoints(str(tmp_path / "no-python"), tmp_path)
    assert (target, draft) == (SHIPPED_DIR / "target", SHIPPED_DIR / "draft")
    files = read_manifest()["files"]
    assert served_weights_sha256(target, draft) == {
        "target": files["target/model.safetensors"], "draft": files["draft/model.safetensors"]}


def test_a_corrupted_shipped_file_is_named(tmp_path: Path, monkeypatch) -> None:
    import shutil

    from reference_engine import checkpoints

    copy = tmp_path / "tiny"
    shutil.copytree(SHIPPED_DIR, copy)
    with (copy / "draft" / "model.safetensors").open("r+b") as handle:
        handle.seek(100)
        handle.write(b"\x00\x01")
    assert [p.split(":")[0] for p in verify_shipped(copy)] == ["draft/model.safetensors"]
    monkeypatch.setattr(checkpoints, "SHIPPED_DIR", copy)
    with pytest.raises(checkpoints.EngineError, match=r"draft/model\.safetensors"):
        ensure_checkpoints(sys.executable, tmp_path)


@pytest.fixture(scope="module")
def reduced_builds(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Two independent builds, at once, of every reduced recipe: the reference recipe and
    each seed pair's (tests/reference_engine/reduced_builds.py), one process per build
    through `checkpoints.build`."""
    if not engine_available():
        pytest.skip(f"{ENGINE_PYTHON} lacks the reference extra (torch, transformers, dflash)")
    root = tmp_path_factory.mktemp("reduced")
    with ThreadPoolExecutor(max_workers=2) as pool:
        return list(pool.map(lambda out: build(ENGINE_PYTHON, out, module=REDUCED_BUILDS),
                             [root / "one", root / "two"]))


@pytest.mark.slow
def test_reduced_recipe_builds_are_bit_identical(reduced_builds: list[Path]) -> None:
    first, second = (folder_hashes(folder) for folder in reduced_builds)
    assert first == second and len(first) == 9
    one, two = (folder / "recipe.json" for folder in reduced_builds)
    assert one.read_bytes() == two.read_bytes()
    assert json.loads(one.read_text())["digest"] != DEFAULT_RECIPE.digest()


@pytest.mark.slow
@pytest.mark.parametrize("pair", PAIRS)
def test_reduced_seed_builds_are_bit_identical(pair: str, reduced_builds: list[Path]) -> None:
    """A seed miniature's build (tests/reference_engine/test_seed_miniatures_shipped_and_
    rebuilt.py holds its shipped files) is deterministic and makes every shipped file."""
    built = [folder / f"seed-{pair}" for folder in reduced_builds]
    first, second = (folder_hashes(folder, names=None) for folder in built)
    assert first == second
    assert set(first) == set(json.loads((pair_dir(pair) / "MANIFEST.json").read_text())["files"])
    assert (built[0] / "recipe.json").read_bytes() == (built[1] / "recipe.json").read_bytes()


def test_verify_command_needs_no_torch_in_the_harness() -> None:
    code = ("import sys, harness.commands.reference as r, harness.cli; "
            "harness.cli.build_parser(); "
            "sys.exit(1 if {'torch', 'transformers'} & set(sys.modules) else 0)")
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
