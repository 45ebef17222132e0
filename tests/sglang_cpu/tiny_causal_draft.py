"""The STANDALONE suite's tiny causal draft, as the harness makes it
(`reference_engine.causal_draft`: the shipped tiny target's first layers, cut
bit for bit). Kept for scripts that made it by hand:

    python -m tests.sglang_cpu.tiny_causal_draft OUT   # writes the draft folder to OUT
"""

from __future__ import annotations

import sys
from pathlib import Path

from harness.builds import REPO_ROOT
from reference_engine.causal_draft import LAYERS, cut_layers

TARGET = REPO_ROOT / "reference_engine" / "tiny" / "target"


def cut(target: Path, out: Path, layers: int = LAYERS) -> Path:
    """Write the first `layers` layers of `target` as a model folder at `out`."""
    return cut_layers(target, out, layers)


if __name__ == "__main__":
    print(cut(TARGET, Path(sys.argv[1])))
