"""Every reduced recipe built in one process, for tests/reference_engine/
test_checkpoints_reproducible.py: `python -m tests.reference_engine.reduced_builds --out DIR`
builds the reference recipe into DIR (`target/`, `draft/`, `recipe.json`, so
`checkpoints.build` sees a complete build) and each seed pair into `DIR/seed-<pair>/`.

Why one process for all: each reduced build computes for a second or two, while a process
that imports torch, transformers and dflash spends about ten. The builds go through the
modules' own command lines (`train.main`, `seed_train.main`), as `harness reference build`
runs them.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from reference_engine import recipe, seed_train, train
from reference_engine.checkpoints import PAIRS


def recipe_args(overrides: dict[str, object]) -> list[str]:
    """`--set FIELD=JSON` for each override, in name order."""
    return [item for name, value in sorted(overrides.items())
            for item in ("--set", f"{name}={json.dumps(value)}")]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    out = parser.parse_args(argv).out
    for pair in PAIRS:  # the reference build last: its recipe.json marks the folder done
        seed_train.main(["--pair", pair, "--out", str(out / f"seed-{pair}"),
                         *recipe_args(recipe.SEED_REDUCED_OVERRIDES)])
    return train.main(["--out", str(out), *recipe_args(recipe.REDUCED_OVERRIDES)])


if __name__ == "__main__":
    sys.exit(main())
