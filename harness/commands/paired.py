"""`harness paired [SUITE...]`: the paired gate's latest findings beside the floors."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from harness.commands import add_results_option

if TYPE_CHECKING:
    from harness.results.record import VerdictStatus


class PairedCommand:
    name = "paired"
    help = "the latest paired-gate finding of each suite (B vs its reference), beside the floors"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("suites", nargs="*", metavar="SERIES",
                            help="suites or series (default: every one with runs)")
        add_results_option(parser)
        parser.add_argument("--since", metavar="TIME",
                            help="only runs started at or after this ISO time (UTC)")
        parser.add_argument("--label", help="only runs with this label (e.g. main)")
        parser.add_argument("--markdown", action="store_true", help="a Markdown table")
        parser.add_argument("--json", action="store_true", help="JSON rows")
        parser.epilog = ("Judges only the latest run of each series (a suite expands to its "
                         "workload entries). Exit codes: 0 every latest run passed; 1 one "
                         "failed (floors or paired gate); else 3 a latest run errored, or a named "
                         "series has no paired run that matches.")

    def run(self, args: argparse.Namespace) -> int:
        import json
        from datetime import UTC, datetime

        from harness.analysis.paired_report import latest_paired, markdown, rows
        from harness.errors import BadInput
        from harness.run.judge import report_exit

        since = None
        if args.since:
            try:
                since = datetime.fromisoformat(args.since.replace("Z", "+00:00"))
            except ValueError:
                raise BadInput(f"--since: not an ISO time: {args.since!r}") from None
            since = since if since.tzinfo else since.replace(tzinfo=UTC)
        table = rows(latest_paired(args.results, args.suites or None, since, args.label))
        if args.json:
            print(json.dumps(table, indent=2, default=str))
        else:
            print(markdown(table))
        return report_exit(_status(row["status"], named=bool(args.suites)) for row in table)


def _status(shown: str, named: bool) -> VerdictStatus:
    """A row's status as the report's exit policy counts it: a series named on the command
    line without a paired run is an error; one found by listing the results is left out."""
    if shown in ("pass", "fail", "error", "skipped"):
        return shown  # type: ignore[return-value]
    if shown in ("no paired run", "not paired"):
        return "error" if named else "pass"
    return "error"  # a status no reader knows is never a pass
