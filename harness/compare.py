"""Compare two runs, two sets of runs, or a run and a baseline (`harness compare`).

A side is chosen by a selector (see `SELECTOR_HELP`). A set of runs is pooled by
prompt: the tokens and steps of one question are summed across runs, so the question
stays the unit of sampling even when it was asked every night. When both sides asked
the same questions the difference is paired (prompt difficulty cancels); otherwise the
two sides are independent samples; against a baseline figure (no per-request data) the
difference carries only the run's uncertainty.
"""

from __future__ import annotations

import glob
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness import stats
from harness.baselines import BaselineFigure, load_baselines
from harness.errors import BadInput
from harness.record import RUN_FILE, RunRecord
from harness.store import (
    Skip,
    load_runs,
    read_record_file,
    read_requests,
    read_run,
)

SELECTOR_HELP = """\
A side is one of:
  RUN_DIR or RUN_DIR/run.json     one run folder
  'results/runs/SUITE/2025*'      a glob of run folders (quote it): a pooled set
  SUITE or SUITE@latest           the latest run of SUITE in --results
  SUITE@previous                  the run before the latest
  SUITE@LABEL                     every run of SUITE labelled LABEL (a pooled set)
  baseline:SUITE@LABEL            a baseline record (a fixed figure, no per-request data)
  FILE.json                       a baseline record file"""


@dataclass
class Side:
    """What one side of a comparison measured."""

    name: str
    records: list[RunRecord] = field(default_factory=list)
    baseline: BaselineFigure | None = None
    tokens: list[int] = field(default_factory=list)  # per question, pooled over runs
    steps: list[int] = field(default_factory=list)
    questions: list[int] = field(default_factory=list)
    n_correct: int = 0
    n_judged: int = 0

    @property
    def has_requests(self) -> bool:
        return len(self.tokens) > 0 and sum(self.steps) > 0

    def accept_length(self) -> float:
        if self.has_requests:
            return stats.accept_length(self.tokens, self.steps)
        if self.baseline is not None:
            return self.baseline.accept_length
        measured = [r.measurement for r in self.records if r.measurement]
        if not measured:
            raise BadInput(f"{self.name}: no accept length recorded")
        steps = sum(m.verify_steps or 0 for m in measured)
        if steps:
            return sum(m.completion_tokens or 0 for m in measured) / steps
        return sum(m.accept_length for m in measured) / len(measured)

    def ci(self, level: float) -> tuple[float, float] | None:
        if self.has_requests and len(self.tokens) >= 2:
            return stats.bootstrap_ci(self.tokens, self.steps, level=level)
        if self.baseline is not None:
            return self.baseline.ci
        if len(self.records) == 1 and self.records[0].measurement:
            return self.records[0].measurement.accept_length_ci
        return None

    def accuracy(self) -> float | None:
        if self.n_judged:
            return self.n_correct / self.n_judged
        if self.baseline is not None:
            return self.baseline.accuracy
        values = [r.measurement.accuracy for r in self.records if r.measurement]
        known = [v for v in values if v is not None]
        return sum(known) / len(known) if known else None

    def per_position(self) -> list[float]:
        summed = stats.sum_histograms(
            [r.measurement.accept_histogram for r in self.records if r.measurement])
        if summed:
            return stats.per_position_acceptance(summed)
        if len(self.records) == 1 and self.records[0].measurement:
            return list(self.records[0].measurement.per_position_acceptance or [])
        return []

    def summary(self, level: float) -> dict[str, Any]:
        return {
            "name": self.name,
            "runs": [r.run_id for r in self.records],
            "builds": sorted({_build_name(r) for r in self.records}),
            "verdicts": [r.verdict.status for r in self.records],
            "baseline": self.baseline.label if self.baseline else None,
            "source": self.baseline.source if self.baseline else None,
            "n_questions": len(self.tokens),
            "accept_length": self.accept_length(),
            "ci": self.ci(level),
            "accuracy": self.accuracy(),
            "per_position_acceptance": self.per_position(),
        }


def _build_name(record: RunRecord) -> str:
    return record.build.spec or record.build.version or record.build.engine


def add_run(side: Side, run_dir: Path) -> None:
    record = read_run(run_dir)
    side.records.append(record)
    pooled = dict(zip(side.questions, zip(side.tokens, side.steps, strict=True), strict=True))
    for row in read_requests(run_dir):
        try:
            question = int(row["question_index"])
            tokens, steps = int(row["completion_tokens"]), int(row["verify_steps"])
        except (KeyError, TypeError, ValueError):
            continue
        old_tokens, old_steps = pooled.get(question, (0, 0))
        pooled[question] = (old_tokens + tokens, old_steps + steps)
        if row.get("correct") is not None:
            side.n_judged += 1
            side.n_correct += bool(row["correct"])
    side.questions = sorted(pooled)
    side.tokens = [pooled[q][0] for q in side.questions]
    side.steps = [pooled[q][1] for q in side.questions]


def _baseline_side(selector: str, root: Path, suite: str, label: str) -> Side:
    for figure in load_baselines(root, suite):
        if figure.label == label:
            return Side(name=selector, baseline=figure)
    known = ", ".join(f.label for f in load_baselines(root, suite)) or "none"
    raise BadInput(f"{selector}: no baseline {label!r} for suite {suite}; known: {known}")


def resolve_side(selector: str, results: Path) -> Side:
    """Turn a selector (SELECTOR_HELP) into a loaded side; BadInput if nothing matches."""
    if selector.startswith("baseline:"):
        suite, _, label = selector.removeprefix("baseline:").partition("@")
        return _baseline_side(selector, results, suite, label)
    path = Path(selector)
    if path.is_file() and path.name != RUN_FILE:
        # Baseline files go through the tolerant reader: external figures lack token sums.
        try:
            row = read_record_file(path)
        except Skip as why:
            raise BadInput(f"{selector}: {why}") from None
        if row["kind"] != "baseline" or row["accept_length"] is None:
            raise BadInput(f"{selector}: a file that is not a run folder must be a baseline")
        ci = (row["ci_low"], row["ci_high"]) if row["ci_low"] is not None else None
        figure = BaselineFigure(
            label=row["label"] or row["run_id"],
            accept_length=float(row["accept_length"]),
            ci=ci,
            accuracy=row["accuracy"],
            source=row["source"],
            engine=row["build.engine"],
            path=str(path),
        )
        return Side(name=selector, baseline=figure)
    if path.exists():
        side = Side(name=selector)
        add_run(side, path.parent if path.name == RUN_FILE else path)
        return side
    if any(c in selector for c in "*?["):
        dirs = sorted(Path(p) for p in glob.glob(selector) if (Path(p) / RUN_FILE).exists())
        if not dirs:
            raise BadInput(f"{selector}: the pattern matches no run folder")
        side = Side(name=selector)
        for run_dir in dirs:
            add_run(side, run_dir)
        return side
    return _suite_side(selector, results)


def _suite_side(selector: str, results: Path) -> Side:
    suite, _, which = selector.partition("@")
    runs = load_runs(results, suite=suite, kind="run")
    if runs.empty:
        raise BadInput(f"{selector}: no runs of suite {suite!r} under {results}")
    if which in ("", "latest", "previous"):
        position = -1 if which != "previous" else -2
        if len(runs) < -position:
            raise BadInput(f"{selector}: suite {suite} has only {len(runs)} run(s)")
        chosen = [runs["path"].iloc[position]]
    else:
        chosen = list(runs.loc[runs["label"] == which, "path"])
        if not chosen:
            labels = ", ".join(sorted({str(v) for v in runs["label"].dropna()})) or "none"
            raise BadInput(f"{selector}: no run of {suite} labelled {which!r}; labels: {labels}")
    side = Side(name=selector)
    for run_dir in chosen:
        add_run(side, Path(run_dir))
    return side


def compare(a: Side, b: Side, level: float = 0.95) -> dict[str, Any]:
    """Both sides' summaries and B minus A with CI and p-values (two-sided, and one-sided
    for a drop of B below A)."""
    result: dict[str, Any] = {"a": a.summary(level), "b": b.summary(level), "level": level}
    if a.has_requests and b.has_requests:
        d = stats.ratio_difference(a.tokens, a.steps, b.tokens, b.steps,
                                   paired=a.questions == b.questions, level=level)  # fmt: skip
    elif a.has_requests or b.has_requests:
        run = b if b.has_requests else a
        d = stats.difference_to_figure(run.tokens, run.steps,
                                       (a if run is b else b).accept_length(),
                                       run_is_b=run is b, level=level)  # fmt: skip
    else:
        d = stats.wald(b.accept_length() - a.accept_length(), math.nan, level,
                       "figures only: no per-request data on either side")  # fmt: skip
    result["difference"] = {"b_minus_a": d.estimate, "ci": d.ci, "p_value": d.p_value,
                            "p_drop": d.p_drop, "method": d.method}  # fmt: skip
    result.update(breakdowns(a, b, result.get("metric") or "per_request", level))
    return result


def side_rows(side: Any) -> list[dict[str, Any]]:
    """A side's request rows (each with its category and histogram), when its loader kept
    them (`Side.rows`); none for a baseline figure."""
    return list(getattr(side, "rows", None) or [])


def breakdowns(a: Any, b: Any, metric: str, level: float = 0.95) -> dict[str, Any]:
    """Per category and per draft position: both sides and B - A with CI and p-values,
    paired by question where both asked the same ones (harness.breakdown). Empty when a
    side has no request rows."""
    from harness import breakdown

    rows_a, rows_b = side_rows(a), side_rows(b)
    if not rows_a or not rows_b:
        return {}
    return {"categories": breakdown.compare_categories(rows_a, rows_b, metric, level),
            "positions": breakdown.compare_positions(rows_a, rows_b, level)}


def render(result: dict[str, Any]) -> None:
    """Print the comparison as a rich table."""
    from rich.console import Console
    from rich.table import Table

    a, b, d = result["a"], result["b"], result["difference"]
    level = round(result["level"] * 100)
    table = Table(title=f"{a['name']}  vs  {b['name']}", show_lines=False)
    table.add_column("")
    table.add_column("A", justify="right")
    table.add_column("B", justify="right")
    table.add_column("B - A", justify="right")

    def fmt(value: Any, digits: int = 3) -> str:
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return "-"
        return f"{value:.{digits}f}" if isinstance(value, float) else str(value)

    def interval(ci: Any) -> str:
        return f"[{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "-"

    table.add_row("runs / baseline", str(len(a["runs"])) if a["runs"] else a["baseline"],
                  str(len(b["runs"])) if b["runs"] else b["baseline"], "")  # fmt: skip
    table.add_row("build", ", ".join(a["builds"]) or "-", ", ".join(b["builds"]) or "-", "")
    table.add_row("questions", str(a["n_questions"]), str(b["n_questions"]), "")
    table.add_row("accept length", fmt(a["accept_length"]), fmt(b["accept_length"]),
                  f"{d['b_minus_a']:+.3f}")  # fmt: skip
    table.add_row(f"{level}% CI", interval(a["ci"]), interval(b["ci"]), interval(d["ci"]))
    table.add_row("p-value (two-sided / drop)", "", "",
                  f"{fmt(d['p_value'], 4)} / {fmt(d['p_drop'], 4)}")  # fmt: skip
    accuracy_a, accuracy_b = a["accuracy"], b["accuracy"]
    delta = f"{accuracy_b - accuracy_a:+.3f}" if None not in (accuracy_a, accuracy_b) else ""
    table.add_row("accuracy", fmt(accuracy_a), fmt(accuracy_b), delta)
    positions_a, positions_b = a["per_position_acceptance"], b["per_position_acceptance"]
    for k in range(max(len(positions_a), len(positions_b))):
        pa = positions_a[k] if k < len(positions_a) else None
        pb = positions_b[k] if k < len(positions_b) else None
        change = f"{pb - pa:+.3f}" if pa is not None and pb is not None else ""
        table.add_row(f"P(position {k + 1} accepted)", fmt(pa), fmt(pb), change)
    table.add_row("verdicts", " ".join(a["verdicts"]) or "-", " ".join(b["verdicts"]) or "-", "")
    console = Console()
    console.print(table)
    console.print(f"difference: {d['method']}")
    for title, rows in (("by category", _category_rows(result)),
                        ("by draft position: P(position k accepted)", _position_rows(result))):
        if rows:
            console.print(_breakdown_table(f"{title} (B - A, {level}% CI, p two-sided)", rows))


def _fmt(value: Any, digits: int = 3, sign: bool = False) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:+.{digits}f}" if sign else f"{value:.{digits}f}"


def _flag(p_value: Any) -> str:
    """Significance marks: * p < 0.05, ** p < 0.01 (two-sided; no correction for the
    number of categories or positions shown)."""
    if p_value is None or (isinstance(p_value, float) and math.isnan(p_value)):
        return ""
    return "**" if p_value < 0.01 else "*" if p_value < 0.05 else ""


def _difference_row(name: str, d: dict[str, Any]) -> list[str]:
    ci = d.get("ci")
    return [name, f"{d['n_a']}/{d['n_b']}", _fmt(d["a"]), _fmt(d["b"]),
            _fmt(d["b_minus_a"], sign=True) + _flag(d["p_value"]),
            f"[{ci[0]:+.3f}, {ci[1]:+.3f}]" if ci else "-", _fmt(d["p_value"], 4)]


def _category_rows(result: dict[str, Any]) -> list[list[str]]:
    return [_difference_row(name, d) for name, d in (result.get("categories") or {}).items()]


def _position_rows(result: dict[str, Any]) -> list[list[str]]:
    return [_difference_row(f"k = {d['position']}", d) for d in result.get("positions") or []]


def _breakdown_table(title: str, rows: list[list[str]]) -> Any:
    from rich.table import Table

    table = Table(title=title)
    for column in ("", "prompts A/B", "A", "B", "B - A", "CI", "p"):
        table.add_column(column, justify="left" if not column else "right")
    for row in rows:
        table.add_row(*row)
    return table
