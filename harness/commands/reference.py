"""`harness reference build|verify`: remake the CPU reference engine's tiny checkpoints.

The project ships the built checkpoints (`harness/engines/reference/tiny/`, with a sha256
manifest), so every machine runs the same weights. `build` retrains them from the recipe
(`--ship` replaces the shipped copy, for a maintainer who changed the recipe); `verify`
rebuilds the full recipe and compares every file with the shipped manifest. Training
runs in a subprocess of the engine environment's Python, so this command, like the rest
of the harness process, never imports torch.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

from harness.errors import BadInput

USAGE = "usage: harness reference build [--out DIR] [--force] [--ship] | verify [--out DIR]"


class ReferenceCommand:
    """The reference engine's maintenance subcommands."""

    name = "reference"
    help = "CPU reference engine: build or verify its tiny target and DFlash draft checkpoints"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        actions = parser.add_subparsers(dest="reference_action", metavar="ACTION")
        build = actions.add_parser(
            "build", help="train the tiny checkpoints (skipped when cached)",
            description="Train the tiny Qwen3 target and DFlash draft deterministically. "
            "Default output: $HARNESS_CACHE (or ~/.cache/spec-harness)/reference/<recipe hash>/.")
        build.add_argument("--out", type=Path, default=None,
                           help="output folder (gets target/, draft/, recipe.json)")
        build.add_argument("--force", action="store_true", help="rebuild even when present")
        build.add_argument("--ship", action="store_true",
                           help="then replace the shipped checkpoints and their manifest")
        build.add_argument("--python", default=sys.executable,
                           help="Python of the engine environment (default: this one)")
        verify = actions.add_parser(
            "verify", help="rebuild the full recipe and compare with the shipped files",
            description="Rebuild the full recipe (about 4 minutes on 2 idle cores) and "
            "compare the sha256 of every file with the shipped manifest. Identical on a "
            "machine of the kind that built them; other CPU types may round differently.")
        verify.add_argument("--out", type=Path, default=None,
                            help="build folder (default: a temporary one, removed after)")
        verify.add_argument("--python", default=sys.executable,
                            help="Python of the engine environment (default: this one)")

    def run(self, args: argparse.Namespace) -> int:
        if args.reference_action == "build":
            return _build(args)
        if args.reference_action == "verify":
            return _verify(args)
        raise BadInput(USAGE)


def _build(args: argparse.Namespace) -> int:
    from harness.build import cache_root
    from harness.engines.reference.causal_draft import causal_draft
    from harness.engines.reference.checkpoints import (
        SHIPPED_DIR,
        build,
        checkpoint_dir,
        write_manifest,
    )

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
    return 0


def _verify(args: argparse.Namespace) -> int:
    from harness.engines.reference.checkpoints import (
        SHIPPED_DIR,
        build,
        folder_hashes,
        read_manifest,
    )

    shipped = read_manifest(SHIPPED_DIR)["files"]
    with tempfile.TemporaryDirectory(prefix="reference-verify-") as scratch:
        out = args.out or Path(scratch) / "build"
        rebuilt = folder_hashes(build(args.python, out, force=True))
    differing = sorted(name for name in set(shipped) | set(rebuilt)
                       if shipped.get(name) != rebuilt.get(name))
    for name in sorted(set(shipped) | set(rebuilt)):
        mark = "DIFFERS" if name in differing else "same"
        print(f"{mark:8} {name}  {rebuilt.get(name, '-')[:16]}")
    from harness.engines.reference.causal_draft import verify_causal_draft

    causal = verify_causal_draft()  # the cut is exact: it matches on every machine
    print(f"{'DIFFERS' if causal else 'same':8} causal draft (tiny:causal)"
          + (f": {', '.join(causal)}" if causal else ""))
    if differing or causal:
        print(f"rebuild differs from the shipped checkpoints in "
              f"{len(differing) + len(causal)} file(s)")
        return 1
    print("rebuild is bit-identical to the shipped checkpoints")
    return 0
