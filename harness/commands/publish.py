"""`harness publish --results DIR --out SITE`: the history as a static site."""

from __future__ import annotations

import argparse
import shlex
import sys

from harness.analysis.trend import TrendParams
from harness.errors import BadInput, ExitCode
from harness.publish.site import build_site


def run(args: argparse.Namespace) -> ExitCode:
    """`harness publish` (its arguments: commands/parsers/publish.py)."""
    if args.window < 2 or not 0 < args.alpha < 1 or args.run_pages < 0:
        raise BadInput("--window must be >= 2, --alpha in (0, 1), --run-pages >= 0")
    if args.files_url and not args.files_url.startswith(("https://", "http://")):
        raise BadInput(f"--files-url {args.files_url!r}: expected an http(s) URL")
    params = TrendParams(alpha=args.alpha, min_shift=args.min_shift, window=args.window)
    command = "harness publish " + " ".join(shlex.quote(a) for a in sys.argv[2:]) \
        if len(sys.argv) > 1 and sys.argv[1] == "publish" else "harness publish"  # fmt: skip
    built = build_site(args.results, args.out, params=params, run_pages=args.run_pages,
                       labels=args.labels, files_url=args.files_url, command=command)
    print(f"site: {built.out}/index.html ({built.series} series, {built.runs} runs, "
          f"{built.pages} pages, {built.bytes / 1e6:.2f} MB"
          + (f"; {built.skipped} file(s) skipped, listed on the overview" if built.skipped
             else "") + ")")
    return ExitCode.PASS


