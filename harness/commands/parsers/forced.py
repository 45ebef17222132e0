"""The parser of `harness forced`; its work: harness/commands/forced.py."""

from __future__ import annotations

import argparse

from harness.commands.parsers import options
from harness.commands.parsers.options import SuiteCommand


class ForcedCommand(SuiteCommand, name="forced", work="harness.commands.forced:run"):
    help = ("measure speed with the acceptance forced through the engine's own knob at a "
            "ladder of accept lengths (a launch each; the target alone once, after the real "
            "run, every point's speedup over it): the system's "
            "speedup curve, the real run on it, the break-even accept length")

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--ladder", metavar="X,X,...",
                            help="forced accept lengths, each in 1..the block size, and "
                            "`real` for the real run's achieved value, e.g. 1,real,4,8 "
                            "(default: 1,real,BLOCK); the real run (knob off) is always "
                            "measured first")
        options.add_questions_option(parser, "questions at each point (default: the suite's)")
        options.add_results_and_build_options(parser)
        parser.add_argument("--against", metavar="SPEC",
                            help="a reference build: its ladder is measured first, then "
                            "the build's at the same forced accept lengths, and a speedup "
                            "drop is split into the system's share (speedup at equal forced "
                            "acceptance) and the draft's (real accept length), each gated "
                            "by the suite's [forced] tolerance; the verdict names which "
                            "failed")
        options.add_record_options(
            parser, label_help="a tag recorded with every point's run",
            plot_help="draw neither the ladder's plot nor the points' own")
        parser.epilog = ("Exit codes: 0 every point measured (with --against: both shares "
                         "within their tolerances); 1 with --against, the system's or the "
                         "draft's share failed (the verdict names which); 2 bad input; 3 a "
                         "point errs or a share has no test; 4 the suite does not fit the "
                         "host; 130 interrupted.")
