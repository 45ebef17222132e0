"""Compare two runs, two sets of runs, or a run and a baseline (`harness compare`).

Both sides (`harness.analysis.sides`) are compared under one accept-length definition, the one
both can give (`sides.common_metric`). The difference is paired on the questions both
sides asked (prompt difficulty cancels), and says how many
(`question_pairing.pairing`); sides whose runs asked them differently (another data hash,
protocol, template, shots or sampling) are never paired, and the result carries loud
`warnings`; with fewer than two shared questions the two sides are independent samples;
against a baseline figure (no per-request data) the difference carries only the run's
uncertainty.
"""

from __future__ import annotations

import dataclasses
import math
import sys
from typing import TypedDict

from rich.console import Console
from rich.table import Table

from harness.analysis.question_pairing import pairing
from harness.analysis.selectors import resolve_side
from harness.analysis.sides import Side, SideSummary, add_run, common_metric
from harness.metrics import breakdown, stats
from harness.metrics.breakdown import DifferenceRow

__all__ = ["Side", "add_run", "compare", "render", "resolve_side"]


class Difference(TypedDict):
    """B - A of the compared accept length."""

    b_minus_a: float
    ci: tuple[float, float] | None
    p_value: float  # two-sided; nan when unknown
    p_drop: float  # one-sided, for a drop of B below A
    method: str


class Pairing(TypedDict):
    paired: bool
    shared_questions: int
    n_a: int
    n_b: int
    description: str


class Family(TypedDict):
    """The breakdown rows Holm's correction ran over."""

    method: str
    tests: int
    categories: int
    positions: int


class Breakdowns(TypedDict, total=False):
    categories: dict[str, DifferenceRow]
    positions: list[DifferenceRow]
    multiple_comparisons: Family


class Comparison(Breakdowns, total=False):
    """`harness compare`'s result (printed as JSON with --json)."""

    a: SideSummary
    b: SideSummary
    level: float
    metric: str
    difference: Difference
    pairing: Pairing
    warnings: list[str]
    engines: dict[str, list[str]]  # both sides' engines, when they differ
    # the paired gate's finding each side's record holds (`harness run --against`),
    # by side: the record's JSON as read
    paired_gate: dict[str, dict[str, object]]


def compare(a: Side, b: Side, level: float = 0.95) -> Comparison:
    """Both sides' summaries and B minus A with CI and p-values (two-sided, and one-sided
    for a drop of B below A)."""
    metric = common_metric(a, b)
    a.use_metric(metric)
    b.use_metric(metric)
    result: Comparison = {"a": a.summary(level), "b": b.summary(level), "level": level,
                          "metric": metric}  # fmt: skip
    matched = None
    if a.has_requests and b.has_requests:
        matched = pairing(a, b)
        if matched.paired:
            tokens_a, steps_a = a.restricted(matched.shared)
            tokens_b, steps_b = b.restricted(matched.shared)
            d = stats.ratio_difference(tokens_a, steps_a, tokens_b, steps_b, paired=True,
                                       level=level)
            if len(matched.shared) < max(matched.n_a, matched.n_b):
                d = dataclasses.replace(d, method=f"{d.method}, on the {len(matched.shared)} "
                                        "questions both sides asked")
        else:
            d = stats.ratio_difference(a.tokens, a.steps, b.tokens, b.steps, paired=False,
                                       level=level)
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
    if matched is not None:
        result["pairing"] = {"paired": matched.paired, "shared_questions": len(matched.shared),
                             "n_a": matched.n_a, "n_b": matched.n_b,
                             "description": matched.describe()}
        result["warnings"] = list(matched.warnings)
    result = {**result, **breakdowns(a, b, metric or "per_request", level,
                                     pair=matched.paired if matched is not None else True)}
    engines = (result["a"]["engines"], result["b"]["engines"])
    if engines[0] and engines[1] and engines[0] != engines[1]:
        # Never silent: both engines' figures are in `metric`'s definition, from each
        # engine's own counts (harness.engines.*), and the comparison names both.
        result["engines"] = {"a": engines[0], "b": engines[1]}
    return result


def breakdowns(a: Side, b: Side, metric: str, level: float = 0.95,
               pair: bool = True) -> Breakdowns:
    """Per category and per draft position: both sides and B - A with CI and p-values,
    paired on the questions both asked (harness.metrics.breakdown) unless `pair` is
    False (the sides asked them differently). Empty when a side has no request rows."""
    rows_a, rows_b = a.rows, b.rows  # none for a baseline figure
    if not rows_a or not rows_b:
        return {}
    found: Breakdowns = {
        "categories": breakdown.compare_categories(rows_a, rows_b, metric, level, pair),
        "positions": breakdown.compare_positions(rows_a, rows_b, level, pair)}
    found["multiple_comparisons"] = adjust(found)
    return found


def adjust(found: Breakdowns) -> Family:
    """Holm's correction over every per-category and per-position row together: each row
    gets `p_adjusted`, which the significance marks use. An A/A comparison of 6 categories
    and 7 positions marked at least one row in 41% of comparisons unadjusted; Holm holds
    the chance of any mark to the level (tests/analysis/test_multiple_comparisons.py)."""
    categories, positions = found.get("categories", {}), found.get("positions", [])
    rows = [*categories.values(), *positions]
    p_values = [_p(row["p_value"]) for row in rows]
    for row, adjusted in zip(rows, stats.holm(p_values), strict=True):
        row["p_adjusted"] = None if math.isnan(adjusted) else adjusted
    tests = sum(not math.isnan(p) for p in p_values)
    return {"method": "holm", "tests": tests,
            "categories": sum(row["p_value"] is not None for row in categories.values()),
            "positions": sum(row["p_value"] is not None for row in positions)}


def _p(value: float | None) -> float:
    return float(value) if isinstance(value, int | float) else math.nan


def render(result: Comparison) -> None:
    """Print the comparison as a rich table."""
    a, b, d = result["a"], result["b"], result["difference"]
    level = round(result["level"] * 100)
    table = Table(title=f"{a['name']}  vs  {b['name']}", show_lines=False)
    table.add_column("")
    table.add_column("A", justify="right")
    table.add_column("B", justify="right")
    table.add_column("B - A", justify="right")

    def fmt(value: object, digits: int = 3) -> str:
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return "-"
        return f"{value:.{digits}f}" if isinstance(value, float) else str(value)

    def interval(ci: tuple[float, float] | None) -> str:
        return f"[{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "-"

    table.add_row("runs / baseline", str(len(a["runs"])) if a["runs"] else a["baseline"],
                  str(len(b["runs"])) if b["runs"] else b["baseline"], "")  # fmt: skip
    table.add_row("build", ", ".join(a["builds"]) or "-", ", ".join(b["builds"]) or "-", "")
    if a.get("engines") or b.get("engines"):
        table.add_row("engine", ", ".join(a.get("engines") or []) or "-",
                      ", ".join(b.get("engines") or []) or "-",
                      "different engines" if "engines" in result else "")
    table.add_row("questions", str(a["n_questions"]), str(b["n_questions"]), "")
    table.add_row(f"accept length ({result.get('metric', '-')})", fmt(a["accept_length"]),
                  fmt(b["accept_length"]), f"{d['b_minus_a']:+.3f}")  # fmt: skip
    table.add_row(f"{level}% CI", interval(a["ci"]), interval(b["ci"]), interval(d["ci"]))
    table.add_row("p-value (two-sided / drop)", "", "",
                  f"{fmt(d['p_value'], 4)} / {fmt(d['p_drop'], 4)}")  # fmt: skip
    accuracy_a, accuracy_b = a["accuracy"], b["accuracy"]
    delta = (f"{accuracy_b - accuracy_a:+.3f}" if accuracy_a is not None
             and accuracy_b is not None else "")
    table.add_row("accuracy", fmt(accuracy_a), fmt(accuracy_b), delta)
    positions_a, positions_b = a["per_position_acceptance"], b["per_position_acceptance"]
    for k in range(max(len(positions_a), len(positions_b))):
        pa = positions_a[k] if k < len(positions_a) else None
        pb = positions_b[k] if k < len(positions_b) else None
        change = f"{pb - pa:+.3f}" if pa is not None and pb is not None else ""
        table.add_row(f"P(position {k + 1} accepted)", fmt(pa), fmt(pb), change)
    table.add_row("verdicts", " ".join(v for v in a["verdicts"] if v) or "-",
                  " ".join(v for v in b["verdicts"] if v) or "-", "")
    # a pipe or a log gets the tables whole (rich would squeeze them to 80 columns)
    console = Console() if sys.stdout.isatty() else Console(width=120)
    console.print(table)
    if result.get("pairing"):
        console.print(f"pairing: {result['pairing']['description']}")
    for warning in result.get("warnings") or []:
        console.print(f"[bold red]WARNING[/bold red]: {warning}")
    console.print(f"difference: {d['method']}")
    for title, rows in (("by category", _category_rows(result)),
                        ("by draft position: P(position k accepted)", _position_rows(result))):
        if rows:
            console.print(_breakdown_table(f"{title} (B - A, {level}% CI, p two-sided)", rows))
    family = result.get("multiple_comparisons")
    if family and family["tests"]:
        console.print(f"marks: * p < 0.05, ** p < 0.01 after Holm's correction over "
                      f"{family['tests']} tests ({family['categories']} categories, "
                      f"{family['positions']} positions); 'Holm' is the adjusted p-value")


def _fmt(value: float | None, digits: int = 3, sign: bool = False) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:+.{digits}f}" if sign else f"{value:.{digits}f}"


def _flag(p_value: float | None) -> str:
    """Significance marks: * p < 0.05, ** p < 0.01 (two-sided; the caller passes the
    Holm-adjusted p-value of a breakdown row)."""
    if p_value is None or (isinstance(p_value, float) and math.isnan(p_value)):
        return ""
    return "**" if p_value < 0.01 else "*" if p_value < 0.05 else ""


def _difference_row(name: str, d: DifferenceRow) -> list[str]:
    ci = d["ci"]
    adjusted = d.get("p_adjusted", d["p_value"])
    return [name, f"{d['n_a']}/{d['n_b']}", _fmt(d["a"]), _fmt(d["b"]),
            _fmt(d["b_minus_a"], sign=True) + _flag(adjusted),
            f"[{ci[0]:+.3f}, {ci[1]:+.3f}]" if ci else "-", _fmt(d["p_value"], 4),
            _fmt(adjusted, 4)]


def _category_rows(result: Breakdowns) -> list[list[str]]:
    return [_difference_row(name, d) for name, d in (result.get("categories") or {}).items()]


def _position_rows(result: Breakdowns) -> list[list[str]]:
    return [_difference_row(f"k = {d['position']}", d) for d in result.get("positions") or []]


def _breakdown_table(title: str, rows: list[list[str]]) -> Table:
    table = Table(title=title)
    for column in ("", "prompts A/B", "A", "B", "B - A", "CI", "p", "Holm"):
        table.add_column(column, justify="left" if not column else "right")
    for row in rows:
        table.add_row(*row)
    return table
