"""The browser test's screenshots, made small for the repository's docs: the top of each
page in 128 colours (Pillow, which matplotlib already needs).

    python -m tests.publish_browser.shrink_shots .cache/publish-browser docs/publish
"""

from __future__ import annotations

import argparse
from pathlib import Path

SHOTS = {"overview.png": 900, "suite-drop.png": 1400, "run.png": 1100}  # name: top px kept


def main(argv: list[str] | None = None) -> int:
    from PIL import Image

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path)
    parser.add_argument("target", type=Path)
    args = parser.parse_args(argv)
    args.target.mkdir(parents=True, exist_ok=True)
    for name, height in SHOTS.items():
        with Image.open(args.source / name) as image:
            top = image.convert("RGB").crop((0, 0, image.width, min(image.height, height)))
            small = top.quantize(colors=128, method=Image.Quantize.MEDIANCUT)
            small.save(args.target / name, optimize=True)
        print(f"{args.target / name}: {(args.target / name).stat().st_size / 1e3:.0f} kB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
