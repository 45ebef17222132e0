"""`harness reference build`: build (or find) the CPU reference engine's tiny checkpoints.

The training runs in a subprocess of the engine environment's Python, so this command,
like the rest of the harness process, never imports torch.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.errors import BadInput


class ReferenceCommand:
    """The reference engine's maintenance subcommands."""

    name = "reference"
    help = "CPU reference engine: build its tiny target and DFlash draft checkpoints"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        actions = parser.add_subparsers(dest="reference_action", metavar="ACTION")
        build = actions.add_parser(
            "build", help="train the tiny checkpoints (skipped when cached)",
            description="Train the tiny Qwen3 target and DFlash draft deterministically. "
            "Default output: $HARNESS_CACHE (or ~/.cache/spec-harness)/reference/<recipe hash>/.")
        build.add_argument("--out", type=Path, default=None,
                           help="output folder (gets target/, draft/, recipe.json)")
        build.add_argument("--force", action="store_true", help="rebuild even when present")
        build.add_argument("--python", default=sys.executable,
                           help="Python of the engine environment (default: this one)")

    def run(self, args: argparse.Namespace) -> int:
        if args.reference_action != "build":
            raise BadInput("usage: harness reference build [--out DIR] [--force]")
        from harness.build import cache_root
        from harness.engines.reference.checkpoints import build, checkpoint_dir

        out = args.out or checkpoint_dir(cache_root())
        folder = build(args.python, out, force=args.force)
        print(f"target: {folder / 'target'}")
        print(f"draft:  {folder / 'draft'}")
        return 0
