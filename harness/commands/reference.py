"""`harness reference build|verify`: remake the project's tiny checkpoints.

The project ships the built checkpoints, each with a sha256 manifest, so every machine
runs the same weights: the reference engine's (`reference_engine/tiny/`, the
default `--pair tiny`) and the seed's own pairs in miniature (`--pair gemma4`,
`--pair muse_glimmer`: `reference_engine/seed/<pair>/`). `build` retrains from
the recipe (`--ship` replaces the shipped copy, for a maintainer who changed the recipe);
`verify` rebuilds the full recipe and compares every file with the shipped manifest.
Training runs in a subprocess of the engine environment's Python, so this command, like
the rest of the harness process, never imports torch.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path

from harness.builds import cache_root
from harness.errors import BadInput, ExitCode
from harness.run.exit_codes import check_exit
from reference_engine.causal_draft import causal_draft, verify_causal_draft
from reference_engine.checkpoints import (
    MANIFEST,
    SHIPPED_DIR,
    build,
    build_pair,
    checkpoint_dir,
    folder_hashes,
    pair_build_dir,
    pair_dir,
    read_manifest,
    write_manifest,
    write_pair_manifest,
)
from reference_engine.recipe import recipe_for

USAGE = ("usage: harness reference build [--pair PAIR] [--out DIR] [--force] [--ship] | "
         "verify [--pair PAIR] [--out DIR]")


def run(args: argparse.Namespace) -> ExitCode:
    """`harness reference` (its arguments: commands/parsers/reference.py)."""
    seed = getattr(args, "pair", "tiny") != "tiny"
    if args.reference_action == "build":
        return _build_seed(args) if seed else _build(args)
    if args.reference_action == "verify":
        return _verify_seed(args) if seed else _verify(args)
    raise BadInput(USAGE)


def _build(args: argparse.Namespace) -> ExitCode:
    out = args.out or checkpoint_dir(cache_root())
    folder = build(args.python, out, force=args.force)
    print(f"target: {folder / 'target'}")
    print(f"draft:  {folder / 'draft'}")
    # the STANDALONE suite's causal draft, cut from the shipped target into the cache
    print(f"causal draft: {causal_draft()}")
    if args.ship:
        for role in ("target", "draft"):
            shutil.rmtree(SHIPPED_DIR / role, ignore_errors=True)
            shutil.copytree(folder / role, SHIPPED_DIR / role)
        shutil.copy2(folder / "recipe.json", SHIPPED_DIR / "recipe.json")
        write_manifest(SHIPPED_DIR)
        print(f"shipped: {SHIPPED_DIR} (manifest rewritten)")
    return ExitCode.PASS


def _compared(shipped: Mapping[str, str], rebuilt: Mapping[str, str], prefix: str = ""
              ) -> list[str]:
    """Each file of either manifest printed `same` or `DIFFERS` with its rebuilt hash;
    the names that differ."""
    names = sorted(set(shipped) | set(rebuilt))
    differing = [name for name in names if shipped.get(name) != rebuilt.get(name)]
    for name in names:
        mark = "DIFFERS" if name in differing else "same"
        print(f"{mark:8} {prefix}{name}  {rebuilt.get(name, '-')[:16]}")
    return differing


def _verify(args: argparse.Namespace) -> ExitCode:
    shipped = read_manifest(SHIPPED_DIR)["files"]
    with tempfile.TemporaryDirectory(prefix="reference-verify-") as scratch:
        out = args.out or Path(scratch) / "build"
        rebuilt = folder_hashes(build(args.python, out, force=True))
    differing = _compared(shipped, rebuilt)
    causal = verify_causal_draft()  # the cut is exact: it matches on every machine
    print(f"{'DIFFERS' if causal else 'same':8} causal draft (tiny:causal)"
          + (f": {', '.join(causal)}" if causal else ""))
    if differing or causal:
        print(f"rebuild differs from the shipped checkpoints in "
              f"{len(differing) + len(causal)} file(s)")
    else:
        print("rebuild is bit-identical to the shipped checkpoints")
    return check_exit(bool(differing or causal))


def _build_seed(args: argparse.Namespace) -> ExitCode:
    out = args.out or pair_build_dir(cache_root(), args.pair)
    folder = build_pair(args.pair, args.python, out, force=args.force)
    print(f"target: {folder / 'target'}")
    print(f"draft:  {folder / 'draft'}")
    if args.ship:
        shipped = pair_dir(args.pair)
        for role in ("target", "draft"):
            shutil.rmtree(shipped / role, ignore_errors=True)
            shutil.copytree(folder / role, shipped / role)
        shutil.copy2(folder / "recipe.json", shipped / "recipe.json")
        write_pair_manifest(shipped, recipe_for(args.pair))
        print(f"shipped: {shipped} (manifest rewritten)")
    return ExitCode.PASS


def _verify_seed(args: argparse.Namespace) -> ExitCode:
    shipped_dir = pair_dir(args.pair)
    try:
        shipped = json.loads((shipped_dir / MANIFEST).read_text())["files"]
    except (OSError, ValueError, KeyError) as error:
        raise BadInput(f"{shipped_dir / MANIFEST}: cannot read the manifest: {error}") from None
    with tempfile.TemporaryDirectory(prefix="reference-verify-") as scratch:
        out = args.out or Path(scratch) / "build"
        rebuilt = folder_hashes(build_pair(args.pair, args.python, out, force=True),
                                names=None)
    differing = _compared(shipped, rebuilt, f"{args.pair}/")
    if differing:
        print(f"rebuild differs from the shipped {args.pair} miniature in "
              f"{len(differing)} file(s)")
    else:
        print(f"rebuild is bit-identical to the shipped {args.pair} miniature")
    return check_exit(bool(differing))
