"""`harness power SUITE`: the smallest accept-length drop detectable per prompt count.

TensorRT-LLM's accuracy tests state their thresholds this way: for a false-alarm rate
alpha and a miss rate beta, the drop (z_{1-alpha} + z_{1-beta}) * sd / sqrt(n) is the
smallest one that n prompts catch. sd is the per-prompt spread of accept length.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.commands import add_results_option

if TYPE_CHECKING:
    from harness.suite import LoadedSuite


class PowerCommand:
    name = "power"
    help = "print the smallest detectable accept-length drop vs number of prompts for a suite"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("suite", help="suite file or name")
        add_results_option(parser, "per-prompt spread is taken from the suite's latest runs here")
        parser.add_argument("--alpha", type=float, help="false-alarm rate (default: the suite's)")
        parser.add_argument("--beta", type=float, help="miss rate (default: the suite's)")
        parser.add_argument("--sd", type=float, metavar="SD",
                            help="per-prompt sd of accept length (default: from the latest "
                            "recorded runs, else a documented default, see docs/statistics.md)")
        parser.add_argument("--runs", type=int, default=5, metavar="N",
                            help="how many latest runs to estimate the spread from (default 5)")
        parser.add_argument("--json", action="store_true", help="print JSON instead of a table")

    def run(self, args: argparse.Namespace) -> int:
        import json

        from harness.errors import BadInput
        from harness.suite import load_suite

        for name in ("alpha", "beta"):
            value = getattr(args, name)
            if value is not None and not 0.0 < value < 0.5:
                raise BadInput(f"--{name} must be in (0, 0.5), got {value}")
        if args.sd is not None and args.sd <= 0:
            raise BadInput(f"--sd must be positive, got {args.sd}")
        report = power_report(load_suite(args.suite), args.results, alpha=args.alpha,
                              beta=args.beta, sd=args.sd, latest_runs=args.runs)  # fmt: skip
        if args.json:
            print(json.dumps(report, indent=2, default=str))
        else:
            render_power(report)
        return 0


def recorded_spread(results: Path, suite: str, latest_runs: int) -> tuple[float, list[str]] | None:
    """Pooled per-prompt sd over the suite's latest runs with request rows, and their ids."""
    import math

    from harness import stats
    from harness.store import load_runs, read_requests

    runs = load_runs(results, suite=suite, kind="run")
    variances, used = [], []
    for path, run_id in zip(runs["path"][::-1], runs["run_id"][::-1], strict=True):
        rows = read_requests(Path(path))
        tokens = [r["completion_tokens"] for r in rows if r.get("verify_steps")]
        steps = [r["verify_steps"] for r in rows if r.get("verify_steps")]
        if len(tokens) >= 10:
            variances.append(stats.prompt_sd(tokens, steps) ** 2)
            used.append(run_id)
        if len(used) >= latest_runs:
            break
    return (math.sqrt(sum(variances) / len(variances)), used) if variances else None


def power_report(
    loaded: LoadedSuite,
    results: Path,
    alpha: float | None = None,
    beta: float | None = None,
    sd: float | None = None,
    latest_runs: int = 5,
) -> dict[str, Any]:
    from harness import stats

    suite = loaded.suite
    alpha = alpha if alpha is not None else getattr(suite.floors, "alpha", 0.05)
    beta = beta if beta is not None else getattr(suite.floors, "beta", 0.2)
    if sd is not None:
        sd_source = "given with --sd"
    elif (found := recorded_spread(results, suite.name, latest_runs)) is not None:
        sd, run_ids = found
        sd_source = f"pooled over {len(run_ids)} recorded run(s): {', '.join(run_ids)}"
    else:
        sd = stats.DEFAULT_PROMPT_SD
        sd_source = f"default {sd} (no recorded runs with request rows under {results})"
    reference = max((b.accept_length for b in suite.baselines), default=None)
    counts = sorted(set(stats.DEFAULT_PROMPT_COUNTS) | {suite.workload.questions})
    rows = stats.power_table(sd, alpha, beta, counts, reference or suite.floors.accept_length)
    margins = {}
    for baseline in suite.baselines:
        margin = baseline.accept_length - suite.floors.accept_length
        if margin > 0:
            margins[f"{baseline.label} -> floor ({margin:.3f})"] = stats.prompts_needed(
                sd, margin, alpha, beta
            )
    return {
        "suite": suite.name,
        "alpha": alpha,
        "beta": beta,
        "sd": sd,
        "sd_source": sd_source,
        "floor": suite.floors.accept_length,
        "reference": reference or suite.floors.accept_length,
        "questions": suite.workload.questions,
        "table": [row.__dict__ for row in rows],
        "prompts_needed": margins,
    }


def render_power(report: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{report['suite']}: smallest detectable drop "
                  f"(alpha {report['alpha']}, power {1 - report['beta']:.2f})")  # fmt: skip
    table.add_column("prompts", justify="right")
    table.add_column("min detectable drop", justify="right")
    table.add_column(f"% of {report['reference']:g}", justify="right")
    for row in report["table"]:
        mark = " (suite)" if row["n_prompts"] == report["questions"] else ""
        relative = row["relative_drop"]
        table.add_row(f"{row['n_prompts']}{mark}", f"{row['min_detectable_drop']:.3f}",
                      f"{100 * relative:.2f}%" if relative is not None else "-")  # fmt: skip
    console = Console()
    console.print(table)
    console.print(f"per-prompt sd {report['sd']:.3f}: {report['sd_source']}")
    for what, n in report["prompts_needed"].items():
        console.print(f"prompts needed to detect a drop from {what}: {n}")
