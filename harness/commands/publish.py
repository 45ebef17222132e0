"""`harness publish --results DIR --out SITE`: the history as a static site."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.commands import add_results_option


class PublishCommand:
    name = "publish"
    help = ("write a static site of every suite's history (overview, per suite, per run): "
            "works from file:// and any static host, no script, nothing fetched")

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        add_results_option(parser)
        parser.add_argument("--out", type=Path, required=True, metavar="SITE",
                            help="the site's folder (a site this command wrote there is replaced)")
        parser.add_argument("--label", action="append", dest="labels", metavar="LABEL",
                            help="only runs with this label, one line each (repeat: main, "
                            "release; default: every label)")
        parser.add_argument("--run-pages", type=int, default=10, metavar="N",
                            help="a page for the latest N runs of each line (and for the runs "
                            "either side of each step); default 10")
        parser.add_argument("--files-url", metavar="URL",
                            help="where the run folders are served (e.g. the history branch on "
                            "GitHub); default: links relative to the site into --results")
        parser.add_argument("--window", type=int, default=60, metavar="N",
                            help="the trend detector's window (as harness trend; default 60)")
        parser.add_argument("--min-shift", type=float, default=0.1, metavar="X",
                            help="smallest accept-length step that counts (default 0.1)")
        parser.add_argument("--alpha", type=float, default=0.01,
                            help="false-alarm probability per line's history (default 0.01)")

    def run(self, args: argparse.Namespace) -> int:
        import shlex
        import sys

        from harness.analysis.trend import TrendParams
        from harness.errors import BadInput
        from harness.publish.site import build_site

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
        return 0
