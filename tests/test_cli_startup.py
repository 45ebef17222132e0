"""`harness --help` stays fast: no heavy library is imported at start-up."""

from __future__ import annotations

import subprocess
import sys

from harness.commands import COMMANDS

HEAVY = ("torch", "transformers", "pandas", "matplotlib", "numpy", "httpx", "rich",
         "huggingface_hub", "dflash", "scipy")

PROBE = """
import sys
from harness.cli import build_parser
parser, commands = build_parser()
print(",".join(sorted(commands)))
print(",".join(sorted({m.split(".")[0] for m in sys.modules} & set(sys.argv[1:]))))
"""


def test_help_imports_no_heavy_library() -> None:
    out = subprocess.run([sys.executable, "-c", PROBE, *HEAVY], capture_output=True,
                         text=True, check=True).stdout.splitlines()
    assert out[1] == "", f"imported at start-up: {out[1]}"


def test_every_command_is_installed() -> None:
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                         check=True).stdout.splitlines()
    assert out[0].split(",") == sorted(COMMANDS)


def test_help_lists_exit_codes() -> None:
    out = subprocess.run([sys.executable, "-m", "harness", "--help"], capture_output=True,
                         text=True, check=True).stdout
    for code in ("0 pass", "1 below a floor", "2 bad input", "3 engine", "4 skipped"):
        assert code in out
