"""`harness bisect SUITE --good SPEC --bad SPEC`: the first commit that moved accept length."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from harness.commands import add_results_option

if TYPE_CHECKING:
    from harness.bisect.session import Session
    from harness.suite.model import LoadedSuite

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


class BisectCommand:
    name = "bisect"
    help = "find the engine commit that changed accept length (GOOD..BAD), few requests a step"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.formatter_class = argparse.RawDescriptionHelpFormatter
        parser.epilog = EPILOG
        parser.add_argument("suite", nargs="?", help="suite file or name (not with --resume)")
        parser.add_argument("--good", metavar="SPEC", help="a build with the old accept length")
        parser.add_argument("--bad", metavar="SPEC", help="a later build where it changed")
        parser.add_argument("--repo", type=Path, metavar="PATH",
                            help="local clone to list the commits of git+URL specs")
        add_results_option(parser)
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
        parser.add_argument("--engine-python", metavar="PATH",
                            help="interpreter of the reference engine's environment")
        parser.add_argument("--json", action="store_true", help="print the result as JSON")

    def run(self, args: argparse.Namespace) -> int:
        import json
        import sys

        from harness.bisect import EXIT_NO_DIFFERENCE, EXIT_NOT_NARROWED, report
        from harness.bisect.driver import Bisect
        from harness.bisect.session import create_session, load_session
        from harness.errors import BadInput
        from harness.suite.model import load_suite

        if args.resume is not None:
            session = load_session(args.results, args.resume or None)
            loaded = load_suite(session.suite)
            _check_resume(args, session, loaded)
        else:
            if not args.suite or not args.good or not args.bad:
                raise BadInput("bisect needs SUITE, --good SPEC and --bad SPEC "
                               "(or --resume [SESSION])")
            loaded = load_suite(args.suite)
            session = create_session(
                loaded, args.good, args.bad, repo=args.repo, results=args.results,
                first_parent=not args.all, paths=tuple(args.paths), alpha=args.alpha,
                wave=args.wave, prompts=args.prompts, max_prompts=args.max_prompts,
                engine_python=args.engine_python)
        print(f"bisect {session.session}: {len(session.commits)} commits, "
              f"{session.prompts} prompts a step (looks every {session.wave}, alpha "
              f"{session.alpha:g}, {session.metric}); journal {session.folder}",
              file=sys.stderr, flush=True)  # progress on stderr: --json keeps stdout JSON
        outcome = Bisect(session, loaded).run()
        result = report.summarise(outcome)
        report.write(outcome, result)
        if result["status"] != "no difference":
            report.plot(outcome, result)
        if args.json:
            print(json.dumps(result, indent=2, default=str))
        else:
            print("\n".join(report.render(result)))
            if result["status"] != "no difference":
                print(f"plot    {session.folder / report.PLOT_FILE}")
        if result["status"] == "no difference":
            return EXIT_NO_DIFFERENCE
        return 0 if result["status"] == "found" else EXIT_NOT_NARROWED


def _check_resume(args: argparse.Namespace, session: Session, loaded: LoadedSuite) -> None:
    from harness.errors import BadInput

    given = {"--good": args.good, "--bad": args.bad}
    for flag, value in given.items():
        recorded = getattr(session, flag.removeprefix("--"))
        if value is not None and value != recorded:
            raise BadInput(f"--resume: {flag} {value!r} differs from the session's {recorded!r}")
    if loaded.sha256 != session.suite_sha256:
        raise BadInput(f"--resume: the suite {session.suite} changed since the "
                       "session started; start a new session")
