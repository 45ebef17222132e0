"""`harness bisect SUITE --good SPEC --bad SPEC`: the first commit that moved accept length."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

from harness.errors import BadInput, ExitCode
from harness.protocols.bisect import report
from harness.protocols.bisect.driver import Bisect
from harness.protocols.bisect.session import create_session, load_session
from harness.run.exit_codes import bisect_exit
from harness.suite.model import load_suite

if TYPE_CHECKING:
    from harness.protocols.bisect.session import Session
    from harness.suite.model import LoadedSuite


def run(args: argparse.Namespace) -> ExitCode:
    """`harness bisect` (its arguments: commands/parsers/bisect.py)."""
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
    return bisect_exit(str(result["status"]))


def _check_resume(args: argparse.Namespace, session: Session, loaded: LoadedSuite) -> None:
    given = {"--good": args.good, "--bad": args.bad}
    for flag, value in given.items():
        recorded = getattr(session, flag.removeprefix("--"))
        if value is not None and value != recorded:
            raise BadInput(f"--resume: {flag} {value!r} differs from the session's {recorded!r}")
    if loaded.sha256 != session.suite_sha256:
        raise BadInput(f"--resume: the suite {session.suite} changed since the "
                       "session started; start a new session")
