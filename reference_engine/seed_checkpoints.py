"""The seed's own model pairs in miniature: shipped, verified, rebuilt.

`seed/<pair>/` (`gemma4`, `muse_glimmer`) holds the built `target/` and `draft/`, the
`recipe.json` they were built from and a `MANIFEST.json` with the recipe's hash and the
sha256 of every file, as `tiny/` does for the reference checkpoints (and for the same
reason: training is deterministic on one machine, not across CPU types, so every machine
serves exactly the shipped weights). The CPU suites name the shipped folders;
`harness reference build --pair PAIR` retrains one from its recipe
(`recipe.py`'s `SeedRecipe`, in a subprocess of the engine environment's Python running
`seed_train`), and `harness reference verify --pair PAIR` rebuilds it and compares every
file with the manifest.

Torch-free: the harness process checks manifests and starts builds.
"""

from __future__ import annotations

import json
from pathlib import Path

from harness.builds import file_sha256
from harness.errors import BadInput, EngineError
from reference_engine import checkpoints
from reference_engine.recipe import RECIPES, SeedRecipe, recipe_for

SEED_DIR = Path(__file__).resolve().parent / "seed"
PAIRS = tuple(RECIPES)
MANIFEST = "MANIFEST.json"
ROLES = ("target", "draft")
TRAIN_MODULE = "reference_engine.seed_train"


def pair_dir(pair: str, root: Path = SEED_DIR) -> Path:
    if pair not in RECIPES:
        raise BadInput(f"no seed pair {pair!r}; known: {', '.join(PAIRS)}")
    return root / pair


def folder_hashes(folder: Path) -> dict[str, str]:
    """sha256 of every file under `folder/{target,draft}/`, by `role/name`."""
    return {f"{role}/{path.name}": file_sha256(path)
            for role in ROLES if (folder / role).is_dir()
            for path in sorted((folder / role).iterdir()) if path.is_file()}


def write_manifest(folder: Path, recipe: SeedRecipe) -> dict:
    manifest = {"recipe": recipe.digest(), "files": folder_hashes(folder)}
    (folder / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return manifest


def verify_shipped(pair: str, root: Path = SEED_DIR) -> list[str]:
    """Differences between a shipped pair, its manifest and its recipe ([] when they agree)."""
    folder = pair_dir(pair, root)
    if not (folder / MANIFEST).is_file():
        return [f"{folder / MANIFEST} is missing"]
    manifest = json.loads((folder / MANIFEST).read_text())
    problems = []
    if manifest.get("recipe") != recipe_for(pair).digest():
        problems.append(f"{folder / MANIFEST}: recipe {manifest.get('recipe')}, but "
                        f"recipe.py's {pair} recipe is {recipe_for(pair).digest()}")
    expected, actual = manifest.get("files", {}), folder_hashes(folder)
    problems += [f"{folder}/{name}: expected {expected.get(name)}, found {actual.get(name)}"
                 for name in sorted(set(expected) | set(actual))
                 if expected.get(name) != actual.get(name)]
    return problems


def shipped_pair(pair: str, root: Path = SEED_DIR) -> tuple[Path, Path]:
    """(target, draft) of a shipped pair, after checking every file against the manifest."""
    problems = verify_shipped(pair, root)
    if problems:
        raise EngineError(f"the shipped {pair} miniature does not match its manifest: "
                          + "; ".join(problems))
    folder = pair_dir(pair, root)
    return folder / "target", folder / "draft"


def build(pair: str, python: str, out: Path, *, force: bool = False,
          recipe_args: list[str] | None = None) -> Path:
    """Train the pair into `out` (under a lock, staged, as the reference build); return it."""
    pair_dir(pair)  # an unknown pair is bad input, before any subprocess
    return checkpoints.build(python, out, force=force, module=TRAIN_MODULE,
                             recipe_args=["--pair", pair, *(recipe_args or [])])


def build_dir(cache_root: Path, pair: str) -> Path:
    """`<cache>/reference/seed-<pair>-<recipe hash>/`: a changed recipe never reuses a build."""
    return cache_root / "reference" / f"seed-{pair}-{recipe_for(pair).digest()}"
