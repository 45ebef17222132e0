"""`harness power SUITE`: the operating characteristic of the test the gate runs.

The fixed gate is "point estimate vs floor" over the suite's questions (`strict`: `>`).
Its error rates follow from the per-prompt sd of the suite's metric: P(fail) =
Phi(-(true - floor) sqrt(n) / sd), about 50% at the floor itself. The report gives, per
prompt count, the margin above the floor a build needs for a false-fail rate <= alpha and
the drop below the floor that fails with probability >= 1 - beta; at the suite's count,
P(fail) for builds near the floor, fixed and sequential, and the sequential rule's
expected number of requests. See docs/statistics.md.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from rich.console import Console
from rich.table import Table

from harness.errors import BadInput, ExitCode
from harness.metrics import paired_gate, stats
from harness.metrics.definitions import metric_pairs
from harness.metrics.floor_checks import floor_checks
from harness.metrics.stopping import SequentialRule
from harness.results.readers import BadRecord, read_requests, read_run
from harness.results.store import load_runs
from harness.run.sequential import MIN_GROUP
from harness.suite.model import load_suite
from harness.workloads import planned_questions

if TYPE_CHECKING:
    from harness.suite.model import LoadedSuite
    from harness.suite.schema import Suite

OFFSETS = (-0.5, -0.3, -0.2, -0.1, 0.0, 0.1, 0.2, 0.3, 0.5)


class CharacteristicRow(TypedDict):
    """P(fail) of the fixed and the sequential gate when the truth is `true_minus_floor`
    from the floor."""

    true_minus_floor: float
    p_fail_fixed: float
    p_fail_sequential: float
    sequential_expected_requests: float


class BaselineRow(TypedDict):
    label: str
    accept_length: float
    margin: float  # baseline - floor
    p_fail_fixed: float
    prompts_for_alpha: int | None


class PairedPower(TypedDict):
    """The paired gate's operating characteristic at the suite's question count."""

    tolerance: str
    tolerated_drop: float
    reference: float
    reference_source: str
    alpha: float
    beta: float
    inconclusive: str
    sd: float
    sd_source: str
    questions: int
    questions_for_power: int
    questions_needed: int
    p_fail_if_equal: dict[str, float]  # inconclusive setting -> P(gate fails | B = A)
    characteristic: list[dict[str, float]]


class FloorRow(TypedDict):
    floor: str
    p_early_fail_if_met: float
    p_early_pass_if_missed: float


class SequentialFloors(TypedDict):
    floors: list[FloorRow]
    p_early_fail_if_all_met: float
    p_early_pass_if_one_missed: float
    min_questions_per_floor: int


class PowerReport(TypedDict):
    """`harness power`'s report (`--json` prints it as it is)."""

    suite: str
    metric: str
    gate: str
    floor: float
    alpha: float
    beta: float
    sd: float
    sd_source: str
    questions: int
    sequential_looks: list[int]
    table: list[dict[str, float]]  # stats.PowerRow's fields, one row a prompt count
    characteristic: list[CharacteristicRow]
    baselines: list[BaselineRow]
    paired_gate: PairedPower | None
    sequential_floors: SequentialFloors


def run(args: argparse.Namespace) -> ExitCode:
    """`harness power` (its arguments: commands/parsers/power.py)."""
    for name in ("alpha", "beta"):
        value = getattr(args, name)
        if value is not None and not 0.0 < value < 0.5:
            raise BadInput(f"--{name} must be in (0, 0.5), got {value}")
    if args.paired_sd is not None and args.paired_sd < 0:
        raise BadInput(f"--paired-sd must be >= 0, got {args.paired_sd}")
    if args.sd is not None and args.sd <= 0:
        raise BadInput(f"--sd must be positive, got {args.sd}")
    if args.runs < 1:
        raise BadInput(f"--runs must be >= 1, got {args.runs}")
    report = power_report(load_suite(args.suite), args.results, alpha=args.alpha,
                          beta=args.beta, sd=args.sd, latest_runs=args.runs,
                          paired_sd=args.paired_sd)  # fmt: skip
    if args.json:
        print(json.dumps(report, indent=2, default=str))
    else:
        render_power(report)
    return ExitCode.PASS




def recorded_spread(
    results: Path, suite: str, metric: str, latest_runs: int
) -> tuple[float, list[str]] | None:
    """Pooled per-prompt sd of the metric's numerators over the suite's latest runs with
    request rows, and the run ids used."""

    runs = load_runs(results, suite=suite, kind="run")
    variances, used = [], []
    for path, run_id in zip(runs["path"][::-1], runs["run_id"][::-1], strict=True):
        numerators, steps = metric_pairs(read_requests(Path(path)), metric)
        if len(numerators) >= 10:
            variances.append(stats.prompt_sd(numerators, steps) ** 2)
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
    paired_sd: float | None = None,
) -> PowerReport:
    suite, floors = loaded.suite, loaded.suite.floors
    metric = getattr(floors, "metric", "server_avg")
    alpha = alpha if alpha is not None else getattr(floors, "alpha", 0.05)
    beta = beta if beta is not None else getattr(floors, "beta", 0.2)
    if sd is not None:
        sd_source = "given with --sd"
    elif (found := recorded_spread(results, suite.name, metric, latest_runs)) is not None:
        sd, run_ids = found
        sd_source = (f"pooled over {len(run_ids)} recorded run(s) ({metric} numerators): "
                     f"{', '.join(run_ids)}")  # fmt: skip
    else:
        sd = stats.DEFAULT_PROMPT_SD
        sd_source = f"default {sd} (no recorded runs with request rows under {results})"
    n = planned_questions(suite.workload)
    counts = sorted(set(stats.DEFAULT_PROMPT_COUNTS) | {n})
    rule = SequentialRule(floor=floors.accept_length, alpha=alpha, beta=beta, max_n=n,
                          strict=floors.strict)  # fmt: skip
    characteristic: list[CharacteristicRow] = []
    for offset in OFFSETS:
        p_sequential, expected = rule.operating_characteristic(offset, sd)
        characteristic.append({"true_minus_floor": offset,
                               "p_fail_fixed": stats.gate_fail_probability(offset, sd, n),
                               "p_fail_sequential": p_sequential,
                               "sequential_expected_requests": expected})  # fmt: skip
    baselines: list[BaselineRow] = []
    for baseline in (b for b in suite.baselines if b.gated):  # another protocol: no margin
        margin = baseline.accept_length - floors.accept_length
        baselines.append({"label": baseline.label, "accept_length": baseline.accept_length,
                          "margin": margin,
                          "p_fail_fixed": stats.gate_fail_probability(margin, sd, n),
                          "prompts_for_alpha": stats.prompts_for_margin(sd, margin, alpha)
                          if margin > 0 else None})  # fmt: skip
    return {
        "suite": suite.name, "metric": metric, "gate": "point estimate " +
        (">" if floors.strict else ">=") + " floor", "floor": floors.accept_length,
        "alpha": alpha, "beta": beta, "sd": sd, "sd_source": sd_source, "questions": n,
        "sequential_looks": rule.looks(),
        "table": [row.__dict__ for row in stats.power_table(sd, alpha, beta, counts)],
        "characteristic": characteristic,
        "baselines": baselines,
        "paired_gate": paired_power(loaded, results, n, sd_given=paired_sd,
                                    latest_runs=latest_runs),
        "sequential_floors": sequential_floors(suite, alpha, beta),
    }  # fmt: skip


def recorded_paired_spread(results: Path, series: str, latest_runs: int
                           ) -> tuple[float, list[str], float] | None:
    """Pooled per-question sd of B - A over the series' latest paired runs (their record's
    `paired.result.margin_sd`), the run ids, and the latest one's A figure."""

    variances, used, levels = [], [], []
    for run_dir in sorted((results / "runs" / series).glob("*"), reverse=True):
        try:
            record = read_run(run_dir)
        except BadRecord:
            continue
        result = record.paired.result if record.paired is not None else None
        if result is None or result.margin_sd is None:
            continue  # not paired, or a finding recorded before margin_sd
        sd, level = result.margin_sd, result.a
        if math.isfinite(sd):
            variances.append(sd**2)
            used.append(record.run_id)
            levels.append(level)
        if len(used) >= latest_runs:
            break
    return (math.sqrt(sum(variances) / len(variances)), used, levels[0]) if variances else None


def paired_power(loaded: LoadedSuite, results: Path, n: int, sd_given: float | None = None,
                 latest_runs: int = 5) -> PairedPower | None:
    """The paired gate's operating characteristic at the suite's question count."""
    suite = loaded.suite
    gate = suite.gate
    if gate is None:
        return None
    relative = gate.relative_drop is not None
    tolerance = paired_gate.Tolerance(float(gate.relative_drop or gate.absolute_drop or 0),
                                      relative, gate.metric or suite.floors.metric)
    # A's level scales a relative tolerance: the latest paired run's A, else the highest
    # baseline (the healthy level), else the floor
    reference, reference_source = suite.floors.accept_length, "the floor"
    own = [b for b in suite.baselines if b.gated]  # another protocol's sets no level
    if own:
        best = max(own, key=lambda b: b.accept_length)
        reference, reference_source = best.accept_length, f"baseline {best.label!r}"
    if sd_given is not None:
        sd, source = sd_given, "given with --paired-sd"
    elif gate.paired_sd is not None:  # what the gate was sized for (the run checks this)
        sd, source = gate.paired_sd, "declared as gate.paired_sd (the gate is sized for it)"
    elif (found := recorded_paired_spread(results, suite.name, latest_runs)) is not None:
        sd, ids, reference = found
        source = f"pooled over {len(ids)} paired run(s): {', '.join(ids)}"
        reference_source = f"A of paired run {ids[0]}"
    else:
        sd = paired_gate.DEFAULT_PAIRED_SD
        source = (f"assumed {sd} (no [gate] paired_sd, no paired runs under {results}): the "
                  "gate is not sized; run `harness calibrate`")
    tolerated = tolerance.threshold(reference)
    return {"tolerance": tolerance.describe(), "tolerated_drop": tolerated,
            "reference": reference, "reference_source": reference_source,
            "alpha": gate.alpha, "beta": gate.beta,
            "inconclusive": gate.inconclusive, "sd": sd, "sd_source": source, "questions": n,
            "questions_for_power": paired_gate.questions_for_power(sd, tolerated, gate.alpha,
                                                                   gate.beta),
            "questions_needed": paired_gate.questions_needed(sd, tolerated, gate.alpha,
                                                             gate.beta, gate.inconclusive),
            # P(gate fails | B = A) under either setting: what an A/A pair would do
            "p_fail_if_equal": {setting: paired_gate.aa_false_alarm(sd, tolerated, n,
                                                                    gate.alpha, setting)
                                for setting in ("pass", "fail")},
            "characteristic": paired_gate.operating_characteristic(
                reference, tolerance, sd, n, gate.alpha, gate.inconclusive)}


def sequential_floors(suite: Suite, alpha: float, beta: float) -> SequentialFloors:
    """What `--sequential` settles and the error rates it guarantees, per floor and for
    the verdict (harness.run.sequential): each floor's early fail <= alpha when the floor
    is met and its early pass <= beta when it is not; the run's early fail of a build that
    meets all F floors <= F alpha (any floor may fail it), its early pass of a build that
    misses one <= beta (a pass needs every floor to pass early)."""
    names = [check.key for check in floor_checks(suite.floors)]
    return {
        "floors": [{"floor": name, "p_early_fail_if_met": alpha,
                    "p_early_pass_if_missed": beta} for name in names],
        "p_early_fail_if_all_met": min(1.0, len(names) * alpha),
        "p_early_pass_if_one_missed": beta,
        "min_questions_per_floor": _min_group(),
    }


def _min_group() -> int:
    return MIN_GROUP


def render_power(report: PowerReport) -> None:
    alpha, beta = report["alpha"], report["beta"]
    console = Console()
    console.print(f"{report['suite']}: gate = {report['gate']} {report['floor']:g} "
                  f"({report['metric']}); per-prompt sd {report['sd']:.3f}: "
                  f"{report['sd_source']}")  # fmt: skip
    table = Table(title="fixed gate per prompt count")
    for column in ("prompts", "se", f"margin for P(false fail) <= {alpha:g}",
                   f"min detectable drop below floor (P(fail) >= {1 - beta:.2f})"):
        table.add_column(column, justify="right")
    for row in report["table"]:
        mark = " (suite)" if row["n_prompts"] == report["questions"] else ""
        table.add_row(f"{row['n_prompts']}{mark}", f"{row['se']:.3f}",
                      f"+{row['fail_margin']:.3f}", f"-{row['caught_drop']:.3f}")  # fmt: skip
    console.print(table)
    looks = report["sequential_looks"]
    oc = Table(title=f"P(fail) at {report['questions']} prompts; sequential looks {looks}")
    for column in ("true - floor", "P(fail) fixed", "P(fail) sequential",
                   "sequential requests (mean)"):
        oc.add_column(column, justify="right")
    for point in report["characteristic"]:
        oc.add_row(f"{point['true_minus_floor']:+.1f}", f"{point['p_fail_fixed']:.3f}",
                   f"{point['p_fail_sequential']:.3f}",
                   f"{point['sequential_expected_requests']:.0f}")  # fmt: skip
    console.print(oc)
    for b in report["baselines"]:
        extra = (f"; {b['prompts_for_alpha']} prompts keep P(false fail) <= {alpha:g}"
                 if b["prompts_for_alpha"] else "")
        console.print(f"baseline {b['label']} {b['accept_length']:g} ({b['margin']:+.3f} from "
                      f"the floor): P(fail) {b['p_fail_fixed']:.3f}{extra}")  # fmt: skip
    console.print("sequential: alpha/beta bound only an early fail/pass; the last look is "
                  "the fixed gate (normal model, docs/statistics.md)")
    paired = report.get("paired_gate")
    if paired:
        console.print(f"paired gate: tolerated drop {paired['tolerated_drop']:.4f} = "
                      f"{paired['tolerance']} at A = {paired['reference']:g} "
                      f"({paired['reference_source']}); one-sided alpha "
                      f"{paired['alpha']:g}; per-question sd of B - A {paired['sd']:.3f}: "
                      f"{paired['sd_source']}")  # fmt: skip
        pt = Table(title=f"paired gate at {paired['questions']} questions (inconclusive "
                         f"judged {paired['inconclusive']})")
        for column in ("true B - A", "relative", "P(not worse)", "P(worse)",
                       "P(inconclusive)", "P(gate fails)"):
            pt.add_column(column, justify="right")
        for row in paired["characteristic"]:
            pt.add_row(f"{row['b_minus_a']:+.4f}", f"{row['relative_change']:+.2%}",
                       f"{row['p_not_worse']:.3f}", f"{row['p_worse']:.3f}",
                       f"{row['p_inconclusive']:.3f}", f"{row['p_gate_fails']:.3f}")
        console.print(pt)
        console.print(f"questions for P(not worse | B = A) >= {1 - paired['beta']:.2f}: "
                      f"{paired['questions_for_power']}; needed with inconclusive = "
                      f"{paired['inconclusive']!r}: {paired['questions_needed']}"
                      + (" (UNDERPOWERED at the suite's count)"
                         if paired["questions"] < paired["questions_needed"] else ""))
        aa = paired["p_fail_if_equal"]
        console.print(f"P(gate fails | B = A) at {paired['questions']} questions: "
                      f"{aa['pass']:.3f} with inconclusive = 'pass', {aa['fail']:.3f} with "
                      f"'fail' (this suite: {paired['inconclusive']!r})")
    floors = report.get("sequential_floors")
    if floors:
        table = Table(title="--sequential settles every floor before it stops (waves "
                            "stratified by category)")
        for column in ("floor", "P(early fail | met)", "P(early pass | missed)"):
            table.add_column(column, justify="right")
        for floor in floors["floors"]:
            table.add_row(floor["floor"], f"<= {floor['p_early_fail_if_met']:g}",
                          f"<= {floor['p_early_pass_if_missed']:g}")
        console.print(table)
        console.print(f"verdict: P(early fail | every floor met) <= "
                      f"{floors['p_early_fail_if_all_met']:g} ({len(floors['floors'])} "
                      f"floors x alpha); P(early pass | a floor missed) <= "
                      f"{floors['p_early_pass_if_one_missed']:g}; a floor settles only with "
                      f">= {floors['min_questions_per_floor']} questions at a look")
