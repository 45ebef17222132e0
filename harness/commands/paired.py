"""`harness paired [SUITE...]`: the paired gate's latest findings beside the floors."""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from harness.analysis.paired_report import latest_paired, markdown, rows
from harness.analysis.staleness import parse_age
from harness.errors import BadInput, EngineError
from harness.run.judge import report_exit

if TYPE_CHECKING:
    from harness.results.record import VerdictStatus


def run(args: argparse.Namespace) -> int:
    """`harness paired` (its arguments: commands/parsers/paired.py)."""
    since = None
    if args.since:
        try:
            since = datetime.fromisoformat(args.since.replace("Z", "+00:00"))
        except ValueError:
            raise BadInput(f"--since: not an ISO time: {args.since!r}") from None
        since = since if since.tzinfo else since.replace(tzinfo=UTC)
    max_age = parse_age(args.max_age) if args.max_age else None
    table = rows(latest_paired(args.results, args.suites or None, since, args.label),
                 max_age=max_age)
    if since is not None and not table:  # as `trend --since`: no night in the window
        raise EngineError(f"{args.results}: no run started since {since.isoformat()}"
                          + (f" labelled {args.label!r}" if args.label else "")
                          + ": tonight's nights left no record")
    if args.json:
        print(json.dumps(table, indent=2, default=str))
    else:
        print(markdown(table))
    return report_exit(_status(row["status"], named=bool(args.suites)) for row in table)




VERDICTS: dict[str, VerdictStatus] = {"pass": "pass", "fail": "fail", "error": "error",
                                      "skipped": "skipped"}


def _status(shown: object, named: bool) -> VerdictStatus:
    """A row's status as the report's exit policy counts it: a series named on the command
    line without a paired run is an error; one found by listing the results is left out."""
    if isinstance(shown, str) and shown in VERDICTS:
        return VERDICTS[shown]
    if shown in ("no paired run", "not paired"):
        return "error" if named else "pass"
    return "error"  # a status no reader knows is never a pass
