"""`harness calibrate SUITE --runs N`: repeated runs of one build, their spread, and the
floor and tolerance they suggest (`harness.metrics.calibration`).

Each repeat is a whole run (a fresh launch): greedy entries are asked the same prompts
again, which shows the engine's nondeterminism across launches and batch compositions;
sampled entries (temperature > 0) get a new set of per-request seeds per repeat
(`sampling_seed` + repeat x SEED_STRIDE), so their spread includes the sampling. The runs
are ordinary records (label `calibrate-<id>`); the calibration record goes to
`results/calibrations/<suite>/<UTC time>-<id>.json` with the build, the host's GPUs,
driver, TP size and the run ids.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Hashable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

from harness.errors import BadInput, EngineError, TopologySkip
from harness.files import atomic_write_text
from harness.metrics.breakdown import question_pairs
from harness.metrics.calibration import summarise_repeats
from harness.results.layout import CALIBRATIONS_DIR
from harness.results.readers import read_calibration, read_requests, read_run
from harness.results.record import RunRecord, new_run_id, utc_now
from harness.run import runner
from harness.suite.model import LoadedSuite, Suite
from harness.suite.schema import document_sha256

if TYPE_CHECKING:
    from harness.run.outcome import RunOptions

SEED_STRIDE = 100_000_000  # far above a request's own offsets (question + 1e6 per turn)
CALIBRATION_FILE_KIND = "calibration"
# A calibration record as its file holds it: JSON, Any as written here and as read back from
# the results folder (`read_calibration` checks the fields `show` and the gate print).
CalibrationDocument: TypeAlias = dict[str, Any]


def with_seeds(loaded: LoadedSuite, repeat: int) -> LoadedSuite:
    """The suite with every sampled workload's per-request seeds moved by the repeat."""
    if repeat == 0:
        return loaded
    document = json.loads(json.dumps(loaded.document))

    def moved(workload: dict[str, Any]) -> None:  # Any: the suite's TOML document
        if float(workload.get("temperature", 0.0) or 0.0) > 0:
            base = workload.get("sampling_seed", workload.get("seed", 0))
            workload["sampling_seed"] = int(base) + repeat * SEED_STRIDE

    moved(document.setdefault("workload", {}))
    for entry in document.get("workloads") or []:
        moved(entry)
    suite = Suite.model_validate(document)
    return LoadedSuite(suite=suite, path=loaded.path, sha256=document_sha256(document),
                       document=document)


def calibrate(loaded: LoadedSuite, options: RunOptions, runs: int
              ) -> tuple[Path, CalibrationDocument]:
    """Run the suite `runs` times, write the calibration record; (path, record)."""
    if runs < 2:
        raise BadInput(f"--runs must be >= 2 (a spread needs two runs), got {runs}")
    started, calibration_id = utc_now(), new_run_id()
    label = f"calibrate-{calibration_id}"
    per_series: dict[str, list[tuple[list[Hashable], list[float], list[int]]]] = {}
    run_ids: dict[str, list[str]] = {}
    first: RunRecord | None = None
    for repeat in range(runs):
        outcome = runner.run_suite(with_seeds(loaded, repeat),
                                   dataclasses.replace(options, label=label))
        if outcome.status == "skipped":  # the host does not fit: exit 4, as `run` says
            raise TopologySkip("; ".join(outcome.reasons))
        for entry in outcome.entries or [outcome]:
            record = entry.record
            if record is None or entry.run_dir is None or record.measurement is None \
                    or record.verdict is None or record.verdict.status == "error" \
                    or record.measurement.partial:
                reasons = ("; ".join(record.verdict.reasons) if record and record.verdict
                           else "no record")
                raise EngineError(f"calibration repeat {repeat + 1}: the run measured "
                                  f"nothing usable: {reasons}")
            series = (record.suite.entry and f"{loaded.suite.name}.{record.suite.entry}") \
                or loaded.suite.name
            metric = record.measurement.metric
            per_series.setdefault(series, []).append(
                question_pairs(read_requests(Path(entry.run_dir)), metric))
            run_ids.setdefault(series, []).append(record.run_id)
            if first is None:  # as stored (secrets masked), through the door
                first = read_run(Path(entry.run_dir))
    gate = loaded.suite.gate
    alpha = gate.alpha if gate else loaded.suite.floors.alpha
    beta = gate.beta if gate else loaded.suite.floors.beta
    series_out = {}
    for series, samples in per_series.items():
        keys = sorted(set(samples[0][0]), key=str)
        if any(sorted(set(s[0]), key=str) != keys for s in samples):
            raise EngineError(f"{series}: the repeats did not answer the same questions")
        aligned = []
        for qs, tokens, steps in samples:
            at = {q: i for i, q in enumerate(qs)}
            aligned.append(([tokens[at[q]] for q in keys], [steps[at[q]] for q in keys]))
        series_out[series] = {"runs": run_ids[series],
                              **summarise_repeats(aligned, alpha, beta)}
    if first is None:  # every repeat records or raises above: not reached
        raise EngineError("calibration: no repeat recorded a run")
    provenance = first.provenance
    calibration: CalibrationDocument = {
        "kind": CALIBRATION_FILE_KIND, "calibration_id": calibration_id,
        "suite": loaded.suite.name, "suite_path": str(loaded.path),
        "suite_sha256": loaded.sha256, "started_at": started.isoformat(),
        "finished_at": utc_now().isoformat(), "n_runs": runs,
        "metric": loaded.suite.floors.metric,
        "protocol": "greedy entries: repeated launches on the same prompts; sampled "
                    f"entries: per-request seeds moved by {SEED_STRIDE} per repeat",
        "build": first.build.model_dump(mode="json"),
        "host": {"gpus": sorted(gpu.name for gpu in provenance.gpus),
                 "driver": provenance.driver, "cuda": provenance.cuda,
                 "cpu": provenance.cpu, "hostname": provenance.hostname,
                 "tp_size": loaded.suite.topology.tp_size},
        "provenance": provenance.model_dump(mode="json"), "series": series_out,
    }
    folder = Path(options.results_dir) / CALIBRATIONS_DIR / loaded.suite.name
    path = folder / f"{started.strftime('%Y%m%dT%H%M%SZ')}-{calibration_id}.json"
    atomic_write_text(path, json.dumps(calibration, indent=2, default=str) + "\n",
                      options.results_dir)  # never through a link out of the results
    return path, calibration


def find_calibration(results: Path, suite: str, calibration_id: str | None = None
                     ) -> tuple[Path, CalibrationDocument] | None:
    """The calibration record with this id (or the newest one) for the suite."""
    folder = Path(results) / CALIBRATIONS_DIR / suite
    for path in sorted(folder.glob("*.json"), reverse=True):
        try:
            data = read_calibration(path)  # the checked door (harness.results.readers)
        except (OSError, ValueError):
            continue
        if not isinstance(data, dict) or data.get("kind") != CALIBRATION_FILE_KIND:
            continue
        if calibration_id is None or data.get("calibration_id") == calibration_id:
            return path, data
    return None


def calibration_lines(loaded: LoadedSuite, results: Path) -> list[str]:
    """What `harness show` prints about where the floors and tolerance came from."""
    gate = loaded.suite.gate
    declared = gate.calibration if gate else None
    lines = []
    found = None
    if declared and declared.startswith("calibration:"):
        wanted = declared.removeprefix("calibration:").strip()
        found = find_calibration(results, loaded.suite.name, wanted)
        if found is None:
            lines.append(f"calibration: {wanted} declared, but no such record under "
                         f"{Path(results) / CALIBRATIONS_DIR / loaded.suite.name}")
    elif declared:
        lines.append(f"floors and tolerance: {declared}")
    else:
        lines.append("floors and tolerance: external (the suite declares no calibration)")
    if found is not None:
        path, data = found
        lines.append(f"calibration {data['calibration_id']} ({path}): {data['n_runs']} runs "
                     f"of {(data.get('build') or {}).get('spec') or 'the installed build'} "
                     f"on {', '.join(data['host']['gpus']) or 'CPU'} (TP "
                     f"{data['host']['tp_size']}, driver {data['host']['driver'] or '-'})")
        for series, s in data["series"].items():
            lines.append(
                f"  {series}: mean {s['mean']:.4f} ({data['metric']}), run-to-run sd "
                f"{s['run_sd']:.4f}, within-run se {s['within_se']:.4f}, paired sd "
                f"{s['paired_sd']:.4f}; suggested floor {s['suggested_floor']:g} "
                f"[{s['floor_rule']}], relative_drop {s['suggested_relative_drop']:g} "
                f"[{s['tolerance_rule']}]")
    return lines
