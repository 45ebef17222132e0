"""`harness export RUN_DIR --format aiperf|vllm-bench`: a stored run in the files users'
tools read (NVIDIA AIPerf's profile_export.jsonl, `vllm bench serve`'s saved summary)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from harness.analysis.export_aiperf import profile_export_lines
from harness.analysis.export_vllm_bench import vllm_bench_summary
from harness.commands.parsers.export import DEFAULT_NAMES
from harness.commands.run_ids import run_by_id
from harness.errors import BadInput, ExitCode
from harness.files import atomic_write_text
from harness.results.layout import RUN_FILE
from harness.results.readers import read_measured_requests, read_run
from harness.secrets import redact_text

# format -> the file written in the run folder when --out is not given
STDOUT = "-"


def run(args: argparse.Namespace) -> ExitCode:
    """`harness export` (its arguments: commands/parsers/export.py)."""
    target = run_by_id(args.target, args.results) or Path(args.target)
    if target.name == RUN_FILE and target.is_file():  # the record named: its folder
        target = target.parent
    if not target.is_dir():
        raise BadInput(f"{args.target}: not a run folder")
    record = read_run(target)  # BadRecord (exit 2) names the file and field
    if record.measurement is None:
        status = record.verdict.status if record.verdict is not None else "none"
        raise BadInput(f"{target / RUN_FILE}: the run has no measurement (verdict "
                       f"{status}): nothing to export")
    # the first bad line, or no row at all (an empty requests.jsonl): exit 2, as compare
    rows = read_measured_requests(target, record, strict=True)
    if args.format == "aiperf":
        text = "".join(json.dumps(line, allow_nan=False) + "\n"
                       for line in profile_export_lines(record, rows))
    else:
        text = json.dumps(vllm_bench_summary(record, rows), allow_nan=False, indent=2) + "\n"
    if args.out == STDOUT:
        print(redact_text(text), end="")
        return ExitCode.PASS
    out = Path(args.out) if args.out else target / DEFAULT_NAMES[args.format]
    try:
        atomic_write_text(out, text, root=None if args.out else target)
    except OSError as error:
        raise BadInput(f"{out}: cannot write ({error.strerror or error})") from None
    print(out)
    return ExitCode.PASS


