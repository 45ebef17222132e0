"""The parser of `harness publish`; its work: harness/commands/publish.py."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.commands import Command
from harness.commands.parsers import options


class PublishCommand(Command, name="publish", work="harness.commands.publish:run"):
    help = ("write a static site of every suite's history (overview, per suite, per run): "
            "works from file:// and any static host, no script, nothing fetched")

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        options.add_results_option(parser)
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
