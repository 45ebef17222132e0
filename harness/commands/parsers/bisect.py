"""The parser of `harness bisect`; its work: harness/commands/bisect.py."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.commands import Command
from harness.commands.parsers import options

EPILOG = """\
GOOD and BAD are refs of one repository: PATH@REF (a local checkout), git+URL@REF
(with --repo, a local clone to list commits from; else a blobless clone is made in the
cache), or for a reference-engine suite reference:PATH@REF. Every measurement is a
normal run record labelled bisect-<session>-<role>; the session's journal, result and
PNG are under DIR/bisect/<session>/.

exit codes: 0 first bad commit found; 2 bad input; 3 GOOD or BAD could not be built or
measured; 4 this host cannot run the suite; 6 GOOD and BAD do not differ significantly
(nothing to bisect); 7 skipped or undecided commits leave several candidates (listed);
130 interrupted (the session is kept: --resume continues it)."""


class BisectCommand(Command, name="bisect", work="harness.commands.bisect:run"):
    help = "find the engine commit that changed accept length (GOOD..BAD), few requests a step"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        options.add_raw_epilog(parser, EPILOG)
        parser.add_argument("suite", nargs="?", help="suite file or name (not with --resume)")
        parser.add_argument("--good", metavar="SPEC", help="a build with the old accept length")
        parser.add_argument("--bad", metavar="SPEC", help="a later build where it changed")
        parser.add_argument("--repo", type=Path, metavar="PATH",
                            help="local clone to list the commits of git+URL specs")
        options.add_results_option(parser)
        parser.add_argument("--all", action="store_true",
                            help="every commit, not only the first-parent line")
        parser.add_argument("--paths", nargs="+", default=[], metavar="P",
                            help="only commits touching these paths")
        parser.add_argument("--resume", nargs="?", const="", metavar="SESSION",
                            help="continue an interrupted session (default: the latest)")
        parser.add_argument("--alpha", type=float, metavar="A",
                            help="error bound of one step's verdict and level of the GOOD/BAD "
                            "test (default 0.01: s steps err with P <= s * alpha)")
        parser.add_argument("--wave", type=int, default=50, metavar="N",
                            help="prompts between looks (default 50, at least 20)")
        parser.add_argument("--prompts", type=int, metavar="N",
                            help="prompts a step may use (default: the suite's questions)")
        parser.add_argument("--max-prompts", type=int, metavar="N",
                            help="prompts an undecided step is extended to (default: twice "
                            "--prompts; equal to --prompts: no extension)")
        options.add_engine_python_option(parser)
        options.add_json_option(parser, "print the result as JSON")
