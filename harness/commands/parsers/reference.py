"""The parser of `harness reference`; its work: harness/commands/reference.py."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.commands import Command

PAIR_CHOICES = ("tiny", "gemma4", "muse_glimmer")

PAIR_HELP = ("which checkpoints: tiny (the reference engine's Qwen3 pair, the default), "
             "gemma4 or muse_glimmer (the seed's pairs in miniature)")


class ReferenceCommand(Command, name="reference", work="harness.commands.reference:run"):
    """The reference engine's maintenance subcommands."""
    help = "CPU reference engine: build or verify its tiny target and DFlash draft checkpoints"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        actions = parser.add_subparsers(dest="reference_action", metavar="ACTION")
        build = actions.add_parser(
            "build", help="train the tiny checkpoints (skipped when cached)",
            description="Train the tiny Qwen3 target and DFlash draft deterministically. "
            "Default output: $HARNESS_CACHE (or ~/.cache/spec-harness)/reference/<recipe hash>/.")
        build.add_argument("--pair", choices=PAIR_CHOICES, default="tiny", help=PAIR_HELP)
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
        verify.add_argument("--pair", choices=PAIR_CHOICES, default="tiny", help=PAIR_HELP)
        verify.add_argument("--out", type=Path, default=None,
                            help="build folder (default: a temporary one, removed after)")
        verify.add_argument("--python", default=sys.executable,
                            help="Python of the engine environment (default: this one)")
