"""`harness run SUITE --build B --against A`: B judged against reference build A, paired.

A (the reference) is measured first on the suite's prompts, on this host, or a stored run
of A is reused when it is truly the same measurement (`reusable`: suite hash, data hash,
engine identity, GPU model, driver, TP size, harness version, a complete run). Then B runs
with the gate's judge in its options: each workload entry's rows are paired with A's by
question, the non-inferiority test (`harness.metrics.paired_gate`) gives "not worse",
"worse" or "inconclusive", and B's verdict is the worse of the floors' and the gate's.
B's record keeps the paired finding and names the run it paired against (`paired`);
the verdict comes from the one judge (`harness.run.judge.decide`).

With `--sequential`, B stops on the floors' rule carrying the paired rule
(`run/sequential.FloorsRule.paired`): only when every floor and the gate have settled
(looks every 50 questions, the gate's alpha spent over the looks); A is measured on every
question (it is the reference every look compares with, and the run a later pair reuses).
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from harness.builds import parse_build_spec
from harness.errors import BadInput, EngineError
from harness.metrics.breakdown import question_pairs
from harness.metrics.paired_gate import PairedResult, PairedRule, Tolerance, paired_test, sizing
from harness.metrics.speedup import GATED, paired_speedup
from harness.results.layout import REQUESTS_FILE, RUN_FILE
from harness.results.readers import BadRecord, read_requests, read_run
from harness.results.record import RequestRow, RunRecord, Speedup
from harness.results.skips import report
from harness.run import plan as planning
from harness.run import preflight, recorded, runner
from harness.run.evidence import PairedEvidence, SpeedupEvidence
from harness.run.identity import (
    IDENTITY_FIELDS,
    SERVED_KEY,
    identity,
    identity_of,
    served,
)
from harness.run.outcome import RunOptions, RunOutcome
from harness.run.workload_record import workload_info
from harness.suite.gate import Gate
from harness.suite.model import LoadedSuite, Suite, suite_entries
from harness.workloads import planned_questions, prepare

if TYPE_CHECKING:
    from harness.metrics.definitions import RequestLike


def tolerance_of(gate: Gate, suite: Suite) -> Tolerance:
    relative = gate.relative_drop is not None
    drop = gate.relative_drop if relative else gate.absolute_drop
    return Tolerance(float(drop), relative, gate.metric or suite.floors.metric)  # type: ignore[arg-type]


def complete(record: RunRecord) -> bool:
    """A measured run that asked every planned request (never partial, never stopped early)."""
    m, verdict = record.measurement, record.verdict
    return (record.kind == "run" and verdict is not None and verdict.status in ("pass", "fail")
            and m is not None and not m.partial and not m.stopped_early
            and m.n_requests == m.n_planned)


def reusable(results_dir: Path, series: str, wanted: Mapping[str, object]) -> Path | None:
    """The newest complete run of `series` whose identity is `wanted`, else None. A build
    with uncommitted changes and no hash of its source is never reused: two different
    edits would look the same."""
    if wanted.get("git_dirty") and not wanted.get("source_hash"):
        return None
    if wanted.get("harness_git_dirty") or not wanted.get("prompts_sha256"):
        return None  # an edited harness (or prompts not hashed): never the same measurement
    folder = results_dir / "runs" / series
    for run_dir in sorted(folder.glob("*"), reverse=True):  # names start with UTC time
        try:
            record = read_run(run_dir)
        except BadRecord as error:  # passed over, and said
            report([], error.path, error.reason)
            continue
        if complete(record) and identity_of(record) == wanted:
            return run_dir
    return None


@dataclass
class Reference:
    """A's side of one series: its run and its per-question (numerator, steps)."""

    series: str
    run_dir: Path
    run_id: str
    spec: str | None
    reused: bool
    pairs: dict[Hashable, tuple[float, int]] = field(default_factory=dict)
    prompts_sha256: str | None = None  # A's workload.prompts_sha256
    prompt_hashes: dict[Hashable, str] = field(default_factory=dict)  # question -> server's hash
    speedup: Speedup | None = None  # A's speedup over its target alone ([speedup])


def reference_from(run_dir: Path, series: str, metric: str, spec: str | None,
                   reused: bool) -> Reference:
    """A's side from its run folder, read through the door before B is measured: every
    request row usable and all of them there (BadRecord naming the file and line, exit
    2), else B's run could only end unpaired."""
    record = read_run(run_dir)
    rows = read_requests(run_dir, record, strict=True)
    counted = record.measurement.n_requests if record.measurement else None
    if counted is not None and counted != len(rows):
        raise BadRecord(run_dir / REQUESTS_FILE, f"{len(rows)} request rows, its {RUN_FILE} "
                        f"counts {counted}: not a whole reference")
    keys, tokens, steps = question_pairs(rows, metric)
    return Reference(series, run_dir, record.run_id, spec, reused,
                     {key: (t, s) for key, t, s in zip(keys, tokens, steps, strict=True)},
                     record.workload.prompts_sha256 if record.workload else None,
                     _prompt_hashes(rows),
                     record.measurement.speedup if record.measurement else None)


def _prompt_hashes(rows: Sequence[RequestLike]) -> dict[Hashable, str]:
    """Question -> the server's hash of its first turn's prompt token ids, where given."""
    out: dict[Hashable, str] = {}
    for row in rows:
        get = row.get if isinstance(row, dict) else lambda k, r=row: getattr(r, k, None)
        digest = get("prompt_sha256")
        if not get("turn") and isinstance(digest, str) and digest:
            out[get("question_index")] = digest
    return out


@dataclass
class _PairedStop:
    """The paired rule as the driver's StopRule (harness.run.drive)."""

    rule: PairedRule
    reference: Reference
    metric: str
    last: PairedResult | None = None

    def looks(self, max_n: int) -> list[int]:
        return self.rule.looks()

    def decide_rows(self, rows: Sequence[RequestRow]) -> str | None:
        a, b, _ = aligned(self.reference, rows, self.metric)
        self.last = self.rule.decide(a, b)
        return None if self.last is None else self.last.decision

    def settings(self) -> dict[str, object]:
        return {"rule": "paired non-inferiority (harness.metrics.paired_gate.PairedRule)",
                "alpha": self.rule.alpha, "spending": self.rule.spending,
                "nominal_alphas": self.rule.nominal_alphas(),
                "wave": self.rule.wave, "tolerance": self.rule.tolerance.describe(),
                "against": self.reference.run_id, "metric": self.metric}


def aligned(reference: Reference, rows: Sequence[RequestLike], metric: str
            ) -> tuple[tuple[list[float], list[int]], tuple[list[float], list[int]],
                       list[Hashable]]:
    """(A's pairs, B's pairs, questions) on B's questions, in B's order; BadInput-free:
    a question A did not answer is an EngineError (the sides are not the same prompts)."""
    keys, tokens, steps = question_pairs(rows, metric)
    missing = [k for k in keys if k not in reference.pairs]
    if missing:
        raise EngineError(f"{reference.series}: B asked {len(missing)} question(s) the "
                          f"reference run {reference.run_id} did not (first: {missing[0]}): "
                          "not the same prompts")
    ours = _prompt_hashes(rows)
    differ = [q for q, h in ours.items() if reference.prompt_hashes.get(q, h) != h]
    if differ:
        raise EngineError(f"{reference.series}: the server saw different prompt tokens for "
                          f"{len(differ)} question(s) in B and in the reference run "
                          f"{reference.run_id} (first: {differ[0]}): not the same prompts")
    a = ([reference.pairs[k][0] for k in keys], [reference.pairs[k][1] for k in keys])
    return a, (list(tokens), list(steps)), keys


@dataclass
class PairedJudge:
    """What B's run needs (RunOptions.pairing): the references and the gate."""

    gate: Gate
    references: dict[str, Reference]
    stops: dict[str, _PairedStop] = field(default_factory=dict)

    def stop_rule(self, suite: Suite, max_n: int) -> _PairedStop:
        tolerance = tolerance_of(self.gate, suite)
        stop = _PairedStop(PairedRule(tolerance, self.gate.alpha, max_n),
                           self._reference(suite.name), tolerance.metric)
        self.stops[suite.name] = stop
        return stop

    def _reference(self, series: str) -> Reference:
        if series not in self.references:
            raise EngineError(f"{series}: no reference run to pair with")
        return self.references[series]

    def evidence(self, suite: Suite, rows: Sequence[RequestLike],
                 prompts_sha256: str | None = None,
                 speedup: Speedup | None = None) -> PairedEvidence:
        """The gate's finding on B's rows, for the judge (`harness.run.judge.decide`): the
        look that settled a sequential run (at that look's spent level), else the fixed
        test on every question B answered. `prompts_sha256`: B's workload hash; a
        reference whose prompts differ is refused (never paired). `speedup`: B's, paired
        with A's when the suite gates it (`[speedup] max_drop`)."""
        reference = self._reference(suite.name)
        if prompts_sha256 and reference.prompts_sha256 \
                and prompts_sha256 != reference.prompts_sha256:
            raise EngineError(f"{suite.name}: the reference run {reference.run_id} sent "
                              "other prompts (workload.prompts_sha256 "
                              f"{reference.prompts_sha256[:12]} vs B's {prompts_sha256[:12]}):"
                              " not the same measurement, never paired")
        tolerance = tolerance_of(self.gate, suite)
        a, b, _ = aligned(reference, rows, tolerance.metric)
        stop = self.stops.get(suite.name)
        if stop is not None and stop.last is not None and stop.last.n == len(b[0]):
            result = stop.last
        else:
            result = paired_test(a, b, tolerance, self.gate.alpha)
        against: dict[str, object] = {"run_id": reference.run_id,
                                      "path": str(reference.run_dir),
                                      "spec": reference.spec, "reused": reference.reused}
        return PairedEvidence(result, self.gate, against,
                              speedup_evidence(suite, reference, speedup, self.gate.alpha))


def speedup_evidence(suite: Suite, reference: Reference, speedup: Speedup | None,
                     alpha: float) -> list[SpeedupEvidence]:
    """The paired speedup gate on each gated figure (`[speedup] max_drop`): B's speedup
    against A's, paired by question; [] where the suite does not gate speedup."""
    setting = suite.speedup
    if setting is None or setting.max_drop is None:
        return []
    return paired_speedup_evidence(reference, speedup, setting.max_drop, alpha,
                                   suite.workload.seed)


def paired_speedup_evidence(reference: Reference, speedup: Speedup | None, max_drop: float,
                            alpha: float, seed: int) -> list[SpeedupEvidence]:
    """B's speedup against the reference's on each gated figure within `max_drop`, paired
    by question (`harness.metrics.speedup.paired_speedup`); a side without a speedup, or
    a pair that makes no test, is evidence with no result (an error, never a pass)."""
    out = []
    for figure in GATED:
        if reference.speedup is None:
            out.append(SpeedupEvidence(figure, None, f"the reference run {reference.run_id} "
                                       "has no speedup over its target alone"))
        elif speedup is None:
            out.append(SpeedupEvidence(figure, None, "this run has no speedup over its "
                                       "target alone"))
        else:
            try:
                out.append(SpeedupEvidence(figure, paired_speedup(
                    reference.speedup, speedup, figure, max_drop, alpha, seed)))
            except ValueError as error:
                out.append(SpeedupEvidence(figure, None, str(error)))
    return out


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def expected_identities(loaded: LoadedSuite, options: RunOptions
                        ) -> dict[str, dict[str, object]]:
    """Per series, the identity a run of A made now would have: A's engine is prepared
    (its environment built or found in the cache, nothing launched) to know its commit
    and dependency hash."""
    loaded_a, chosen = planning.choose_build(loaded, options)
    suite = loaded_a.suite
    engine = planning.prepare_engine(suite, options, planning.models(suite, options), chosen)
    engine.build.options.update(planning.build_options(suite))
    engine.build.options[SERVED_KEY] = served(engine.models, engine.checkpoints)
    gpus = preflight.gpu_inventory()
    fit = preflight.check_fit(suite.topology, gpus, options.gpu_devices)
    provenance = recorded.provenance(loaded_a, engine, gpus, fit, None)
    out = {}
    for entry in suite_entries(loaded_a, list(options.entries) if options.entries else None):
        data = prepare(entry.loaded.suite.workload)
        sent = workload_info(entry.loaded.suite, entry.name, data, engine)
        out[entry.series] = identity(entry.loaded.sha256, entry.loaded.document, engine.build,
                                     provenance, sent)
    return out


def run_paired(loaded: LoadedSuite, options: RunOptions, against: str,
               against_label: str = "against", reuse: bool = True) -> RunOutcome:
    """Measure (or reuse) A, then run B judged by floors and the paired gate."""
    gate = loaded.suite.gate or Gate(relative_drop=0.02)  # a pair needs a tolerance
    if loaded.suite.gate is None:
        _say("note: the suite has no [gate]: default tolerated drop 2% of A, alpha 0.05")
    options_a = dataclasses.replace(options, sglang=against, patch=None, label=against_label,
                                    sequential=False, stop_rule=None, enforce_contract=False,
                                    pairing=None)
    fit = preflight.check_fit(loaded.suite.topology, preflight.gpu_inventory(),
                              options.gpu_devices)
    if not fit.fits:  # skipped (exit 4) before either side is built or measured
        return runner.run_suite(loaded, options)
    for line in sizing_lines(loaded, options):  # before a GPU hour is spent
        _say(line)
    setting = loaded.suite.speedup
    if setting is not None and setting.max_drop is not None:
        _say(f"speedup gate: B's TPOT and throughput speedups over its target alone within "
             f"{setting.max_drop:.1%} of A's, paired by prompt (one-sided alpha "
             f"{gate.alpha:g}, inconclusive judged {gate.inconclusive})")
    wanted = expected_identities(loaded, options_a) if reuse else {}
    references: dict[str, Reference] = {}
    metric_of = _metrics(loaded, options)
    for series, ident in wanted.items():
        found = reusable(options.results_dir, series, ident)
        if found is not None:
            _say(f"reference {series}: reusing run {found.name} of {against} (the same "
                 "measurement: suite, data and prompts, harness commit, engine build, served "
                 "models and weights, GPU or CPU, driver, TP size)")
            references[series] = reference_from(found, series, metric_of[series], against, True)
    missing = [s for s in metric_of if s not in references]
    if missing:
        entries = [_entry_name(loaded, s) for s in missing]
        _say(f"reference: measuring {against} on this host ({', '.join(missing)})")
        outcome_a = runner.run_suite(loaded, dataclasses.replace(options_a, entries=entries))
        if outcome_a.status == "skipped":  # the host does not fit the suite: nor B then
            return outcome_a
        for entry in outcome_a.entries or [outcome_a]:
            record = entry.record
            verdict = record.verdict if record is not None else None
            if record is None or entry.run_dir is None or record.measurement is None \
                    or (verdict is not None and verdict.status == "error"):
                reasons = "; ".join(verdict.reasons) if verdict is not None else "no record"
                raise EngineError(f"the reference build {against} measured nothing: {reasons}")
            series = record.suite.name
            references[series] = reference_from(Path(entry.run_dir), series, metric_of[series],
                                                against, False)
    judge = PairedJudge(gate, references)
    return runner.run_suite(loaded, dataclasses.replace(options, pairing=judge))


def sizing_lines(loaded: LoadedSuite, options: RunOptions) -> list[str]:
    """Per series: is the gate sized for its question count ("underpowered: N questions
    needed" when not), from the declared `[gate] paired_sd`. A's level for a relative
    tolerance: the highest baseline, else the floor (the run's A is not measured yet)."""
    gate = loaded.suite.gate
    if gate is None:
        return []
    lines = []
    for entry in suite_entries(loaded, list(options.entries) if options.entries else None):
        suite = entry.loaded.suite
        level = max([b.accept_length for b in suite.baselines if b.gated],
                    default=suite.floors.accept_length)  # another protocol's sets no level
        tolerated = tolerance_of(gate, suite).threshold(level)
        found = sizing(gate, tolerated, planned_questions(suite.workload))
        lines.append(f"{entry.series}: {found['message']}")
    return lines


def _metrics(loaded: LoadedSuite, options: RunOptions) -> dict[str, str]:
    gate = loaded.suite.gate
    return {e.series: (gate.metric if gate and gate.metric else e.loaded.suite.floors.metric)
            for e in suite_entries(loaded, list(options.entries) if options.entries else None)}


def _entry_name(loaded: LoadedSuite, series: str) -> str:
    return "main" if series == loaded.suite.name else series.removeprefix(loaded.suite.name + ".")


def check_against(loaded: LoadedSuite, against: str | None) -> str | None:
    """The reference build a run pairs against: --against, else the suite's gate.against."""
    spec = against or (loaded.suite.gate.against if loaded.suite.gate else None)
    if spec is not None:
        parse_build_spec(spec, engine=loaded.suite.engine.kind, flag="--against")
    return spec


__all__ = ["IDENTITY_FIELDS", "SERVED_KEY", "BadInput", "PairedJudge", "Reference",
           "check_against", "identity", "identity_of", "reusable", "run_paired", "served",
           "tolerance_of"]
