"""Find the tiny reference checkpoints (shipped with the project) or build them.

Why shipped: training on CPU is deterministic on one machine but not across CPU types
(kernels that use other vector instructions round differently), so checkpoints built on
two machines differ and so do the figures measured with them. The project therefore ships
the built target and draft (`tiny/`, about 8 MB) with a manifest of their sha256; every
machine runs exactly those weights. `harness reference build` and the recipe remake them,
and `harness reference verify` rebuilds the full recipe and compares with the shipped files.

Why a subprocess for builds: the harness process stays torch-free (design.md); the build
runs in the engine environment's Python (`python -m reference_engine.train`).
Why a file lock: pytest-xdist workers or parallel suites may all ask for a build at once;
exactly one builds, the others wait and reuse. The build writes into a temporary folder
and renames it into place, so a crash never leaves a half-built cache entry.

The seed's own model pairs in miniature are shipped, verified and rebuilt the same way:
`seed/<pair>/` (`gemma4`, `muse_glimmer`) holds the built `target/` and `draft/`, the
`recipe.json` they were built from and a `MANIFEST.json` with the recipe's hash and the
sha256 of every file (every file of a role: gemma-4's target has a processor config too).
The CPU suites name the shipped folders; `harness reference build --pair PAIR` retrains
one from its recipe (`recipe.py`'s `SeedRecipe`, in a subprocess running `seed_train`), and
`harness reference verify --pair PAIR` rebuilds it and compares every file with the
manifest.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TypedDict

import harness
from harness.builds import bounded_lock, file_sha256, sweep_stale
from harness.errors import BadInput, EngineError
from harness.files import cache_root as harness_cache_root
from reference_engine.recipe import DEFAULT_RECIPE, RECIPES, Hashed, Recipe, SeedRecipe, recipe_for

BUILD_TIMEOUT_S = 1800
SHIPPED_DIR = Path(__file__).resolve().parent / "tiny"
MANIFEST = "MANIFEST.json"
ROLES = ("target", "draft")
# Every file of a checkpoint folder that shapes what the engine computes.
CHECKPOINT_FILES = ("config.json", "generation_config.json", "model.safetensors",
                    "tokenizer.json", "tokenizer_config.json")


def checkpoint_dir(cache_root: Path, recipe: Recipe = DEFAULT_RECIPE) -> Path:
    """`<cache_root>/reference/<recipe hash>/`: a changed recipe never reuses a stale build."""
    return cache_root / "reference" / recipe.digest()


def is_complete(folder: Path) -> bool:
    """recipe.json is written last, so its presence means the build finished."""
    return (folder / "recipe.json").is_file() and all(
        (folder / role / name).is_file()
        for role in ROLES
        for name in ("config.json", "model.safetensors")
    )


def folder_hashes(folder: Path, names: tuple[str, ...] | None = CHECKPOINT_FILES
                  ) -> dict[str, str]:
    """sha256 of the files present under `folder/{target,draft}/`, by `role/name`: those
    named (the tiny pair's checkpoint files), or every file (None: a seed pair's)."""
    return {f"{role}/{path.name}": file_sha256(path)
            for role in ROLES if (folder / role).is_dir()
            for path in (sorted((folder / role).iterdir()) if names is None
                         else [folder / role / name for name in names])
            if path.is_file()}


def served_weights_sha256(target: Path, draft: Path) -> dict[str, str]:
    """The sha256 of the weights a server runs: `{"target": ..., "draft": ...}`.

    Torch-free and cheap (two ~4 MB files), for provenance: two runs with equal values ran
    the same weights, whatever folder or machine they came from.
    """
    return {"target": file_sha256(Path(target) / "model.safetensors"),
            "draft": file_sha256(Path(draft) / "model.safetensors")}


class Manifest(TypedDict):
    """MANIFEST.json: the recipe's hash and each checkpoint file's sha256 (as written by
    `write_manifest`)."""

    recipe: str
    files: dict[str, str]


def read_manifest(folder: Path = SHIPPED_DIR) -> Manifest:
    manifest: Manifest = json.loads((folder / MANIFEST).read_text())  # as write_manifest wrote
    return manifest


def write_manifest(folder: Path, recipe: Hashed = DEFAULT_RECIPE,
                   names: tuple[str, ...] | None = CHECKPOINT_FILES) -> Manifest:
    """`folder/MANIFEST.json`: the recipe's hash and the sha256 of its files (`names`, as
    `folder_hashes`)."""
    manifest: Manifest = {"recipe": recipe.digest(), "files": folder_hashes(folder, names)}
    (folder / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return manifest


def manifest_differences(folder: Path, expected: dict[str, str],
                         names: tuple[str, ...] | None = CHECKPOINT_FILES) -> list[str]:
    """`role/name: expected X, found Y` for each file whose sha256 differs from `expected`
    (a manifest's files), or that only one side has."""
    actual = folder_hashes(folder, names)
    return [f"{name}: expected {expected.get(name)}, found {actual.get(name)}"
            for name in sorted(set(expected) | set(actual))
            if expected.get(name) != actual.get(name)]


def verify_shipped(folder: Path = SHIPPED_DIR) -> list[str]:
    """Differences between the shipped files and their manifest ([] when they match)."""
    if not (folder / MANIFEST).is_file():
        return [f"{folder / MANIFEST} is missing"]
    return manifest_differences(folder, read_manifest(folder)["files"])


def shipped_checkpoints(recipe: Recipe = DEFAULT_RECIPE) -> tuple[Path, Path] | None:
    """(target, draft) shipped with the project, or None if absent or for another recipe."""
    folder = SHIPPED_DIR
    if not (folder / MANIFEST).is_file() or not is_complete(folder):
        return None
    if read_manifest(folder)["recipe"] != recipe.digest():
        return None
    problems = verify_shipped(folder)
    if problems:
        raise EngineError("the shipped reference checkpoints do not match their manifest "
                          f"({folder}): {'; '.join(problems)}")
    return folder / "target", folder / "draft"


TRAIN_MODULE = "reference_engine.train"
SEED_TRAIN_MODULE = "reference_engine.seed_train"


def build(python: str, out: Path, *, force: bool = False,
          recipe_args: list[str] | None = None, module: str = TRAIN_MODULE) -> Path:
    """Build the checkpoints into `out` (under a lock) unless already there; return `out`.
    `module` is the build's entry point (`SEED_TRAIN_MODULE` makes a seed miniature:
    `build_pair`)."""
    out = out.expanduser().resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    sweep_stale(out.parent)  # partial builds of processes that died
    with bounded_lock(Path(str(out) + ".lock"), "building the reference checkpoints"):
        if is_complete(out) and not force:
            return out
        staging = out.with_name(f"{out.name}.building-{os.getpid()}")
        shutil.rmtree(staging, ignore_errors=True)
        try:
            _run_build(python, staging, recipe_args or [], module)
            if out.exists():
                shutil.rmtree(out)
            staging.rename(out)
        finally:  # an interrupted or failed build leaves no partial folder behind
            shutil.rmtree(staging, ignore_errors=True)
    return out


def ensure_checkpoints(python: str = sys.executable,
                       cache_root: Path | None = None) -> tuple[Path, Path]:
    """(target dir, draft dir) of the default recipe: the shipped ones, else a cached build."""
    shipped = shipped_checkpoints()
    if shipped is not None:
        return shipped
    folder = build(python, checkpoint_dir(cache_root or harness_cache_root()))
    return folder / "target", folder / "draft"


def default_dirs(cache_root: Path | None = None) -> tuple[Path, Path]:
    """Where `ensure_checkpoints` would serve from, without building or hashing (plans)."""
    folder = SHIPPED_DIR
    if (folder / MANIFEST).is_file() and read_manifest(folder)["recipe"] == DEFAULT_RECIPE.digest():
        return folder / "target", folder / "draft"
    built = checkpoint_dir(cache_root or harness_cache_root())
    return built / "target", built / "draft"


def _run_build(python: str, staging: Path, recipe_args: list[str], module: str) -> None:
    # The engine env may not have this checkout installed: put it on the child's path.
    source_root = str(Path(harness.__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        filter(None, [source_root, os.environ.get("PYTHONPATH")]))}
    command = [python, "-m", module, "--out", str(staging), *recipe_args]
    try:
        completed = subprocess.run(command, env=env, timeout=BUILD_TIMEOUT_S, check=False)
    except FileNotFoundError as error:
        raise EngineError(f"engine python {python!r} not found: {error}") from error
    except subprocess.TimeoutExpired as error:
        shutil.rmtree(staging, ignore_errors=True)
        raise EngineError(f"reference checkpoint build exceeded {BUILD_TIMEOUT_S} s") from error
    if completed.returncode != 0 or not is_complete(staging):
        shutil.rmtree(staging, ignore_errors=True)
        raise EngineError(
            f"reference checkpoint build failed (exit {completed.returncode}): "
            f"{' '.join(command)}; its log is above. Does {python} have the `reference` "
            "extra installed (pip install -e '.[reference]')?")


# ---------------------------------------------------------------- the seed pairs

SEED_DIR = Path(__file__).resolve().parent / "seed"
PAIRS = tuple(RECIPES)


def pair_dir(pair: str, root: Path = SEED_DIR) -> Path:
    if pair not in RECIPES:
        raise BadInput(f"no seed pair {pair!r}; known: {', '.join(PAIRS)}")
    return root / pair


def verify_shipped_pair(pair: str, root: Path = SEED_DIR) -> list[str]:
    """Differences between a shipped pair, its manifest and its recipe ([] when they agree)."""
    folder = pair_dir(pair, root)
    if not (folder / MANIFEST).is_file():
        return [f"{folder / MANIFEST} is missing"]
    manifest = json.loads((folder / MANIFEST).read_text())
    problems = []
    if manifest.get("recipe") != recipe_for(pair).digest():
        problems.append(f"{folder / MANIFEST}: recipe {manifest.get('recipe')}, but "
                        f"recipe.py's {pair} recipe is {recipe_for(pair).digest()}")
    problems += [f"{folder}/{difference}" for difference in
                 manifest_differences(folder, manifest.get("files", {}), names=None)]
    return problems


def shipped_pair(pair: str, root: Path = SEED_DIR) -> tuple[Path, Path]:
    """(target, draft) of a shipped pair, after checking every file against the manifest."""
    problems = verify_shipped_pair(pair, root)
    if problems:
        raise EngineError(f"the shipped {pair} miniature does not match its manifest: "
                          + "; ".join(problems))
    folder = pair_dir(pair, root)
    return folder / "target", folder / "draft"


def build_pair(pair: str, python: str, out: Path, *, force: bool = False,
               recipe_args: list[str] | None = None) -> Path:
    """Train the pair into `out` (under a lock, staged, as the reference build); return it."""
    pair_dir(pair)  # an unknown pair is bad input, before any subprocess
    return build(python, out, force=force, module=SEED_TRAIN_MODULE,
                 recipe_args=["--pair", pair, *(recipe_args or [])])


def pair_build_dir(cache_root: Path, pair: str) -> Path:
    """`<cache>/reference/seed-<pair>-<recipe hash>/`: a changed recipe never reuses a build."""
    return cache_root / "reference" / f"seed-{pair}-{recipe_for(pair).digest()}"


def write_pair_manifest(folder: Path, recipe: SeedRecipe) -> Manifest:
    """A seed pair's manifest: its recipe's hash and every file's sha256."""
    return write_manifest(folder, recipe, names=None)


# ---------------------------------------------------------------- uniform-layer drafts

# vLLM's V1 model runner (the only one on CPU) refuses "mixed sliding/full dflash drafts"
# (vllm/config/vllm.py, `_get_v1_model_runner_unsupported_features`); the shipped draft is
# 4 sliding + 1 full. A uniform copy keeps its weights and sets every layer to one type.
UNIFORM_KINDS = {"sliding": "sliding_attention", "full": "full_attention"}
UNIFORM_FILES = ("model.safetensors", "tokenizer.json", "tokenizer_config.json")


def uniform_draft_config(config: Mapping[str, object], kind: str) -> dict[str, object]:
    """The draft's config.json with every layer of type `kind` ("sliding" or "full")."""
    layer_type = UNIFORM_KINDS[kind]
    layers = config["layer_types"]
    if not isinstance(layers, list):
        raise TypeError(f"draft config layer_types: expected a list, got {type(layers).__name__}")
    changed = {**config, "layer_types": [layer_type] * len(layers)}
    changed["use_sliding_window"] = kind == "sliding"
    changed["max_window_layers"] = len(layers) if kind == "sliding" else 0
    return changed


def uniform_draft(kind: str = "sliding", cache_root: Path | None = None,
                  source: Path | None = None) -> tuple[Path, Path]:
    """(target, uniform draft) made from the shipped (or `source`) checkpoints: the draft's
    files copied byte for byte and its config rewritten, into
    `<cache>/reference/uniform-<kind>-<hash of the source draft>/`; the same bytes on every
    rebuild (`config.json` is written with sorted keys)."""
    if kind not in UNIFORM_KINDS:
        raise EngineError(f"no uniform draft kind {kind!r}; known: {', '.join(UNIFORM_KINDS)}")
    if source is None:
        shipped = shipped_checkpoints()
        if shipped is None:
            raise EngineError(f"the shipped reference checkpoints are missing ({SHIPPED_DIR})")
        source = shipped[0].parent
    target, draft = source / "target", source / "draft"
    digest = file_sha256(draft / "config.json")[:8] + file_sha256(draft / "model.safetensors")[:8]
    out = (cache_root or harness_cache_root()) / "reference" / f"uniform-{kind}-{digest}"
    if (out / "config.json").is_file():
        return target, out
    out.parent.mkdir(parents=True, exist_ok=True)
    with bounded_lock(Path(str(out) + ".lock"), "writing the uniform-layer draft"):
        if (out / "config.json").is_file():
            return target, out
        staging = out.with_name(f"{out.name}.building-{os.getpid()}")
        shutil.rmtree(staging, ignore_errors=True)
        try:
            staging.mkdir()
            for name in UNIFORM_FILES:
                if (draft / name).is_file():
                    shutil.copyfile(draft / name, staging / name)
            config = uniform_draft_config(json.loads((draft / "config.json").read_text()), kind)
            (staging / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True)
                                                 + "\n")
            staging.rename(out)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return target, out


def draft_files_sha256(draft: Path) -> dict[str, str]:
    """sha256 of a draft folder's config and weights (for the record)."""
    return {"draft_config": file_sha256(draft / "config.json"),
            "draft": file_sha256(draft / "model.safetensors")}
