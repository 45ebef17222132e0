"""Baselines: runs of record with `kind = "baseline"`, each saying where its figure came from.

They live in `results/baselines/<suite>--<label>.json` (docs/run-record.md): external
figures (SGLang PR #34524's 5.27 and 5.62) and figures measured here, marked as such.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from harness.record import BASELINES_DIR, RunRecord, atomic_write_text
from harness.store import Skip, default_results_dir, is_number, log, read_record_file


def baseline_path(root: Path, suite: str, label: str) -> Path:
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in label)
    return Path(root) / BASELINES_DIR / f"{suite}--{safe}.json"


def save_baseline(root: Path, record: RunRecord) -> Path:
    if record.kind != "baseline" or not record.label:
        raise ValueError("a baseline record needs kind='baseline' and a label")
    path = baseline_path(root, record.suite.name, record.label)
    atomic_write_text(path, record.model_dump_json(indent=2, exclude_none=True) + "\n")
    return path


@dataclass(frozen=True)
class BaselineFigure:
    """A baseline as the plots and comparisons need it."""

    label: str
    accept_length: float
    ci: tuple[float, float] | None
    accuracy: float | None
    source: str | None
    engine: str | None
    path: str


def load_baselines(root: Path | str | None, suite_name: str) -> list[BaselineFigure]:
    """The baseline records of one suite, ordered by accept length (reads baselines/ only)."""
    root = Path(root) if root is not None else default_results_dir()
    rows = []
    for file in sorted((root / BASELINES_DIR).glob("*.json")):
        try:
            row = read_record_file(file)
        except (Skip, FileNotFoundError) as why:
            log.warning("skipped %s: %s", file, why)
            continue
        if row["suite"] == suite_name and row["kind"] == "baseline":
            rows.append(row)
    figures = []
    for row in rows:
        if not is_number(row["accept_length"]):
            log.warning("skipped baseline %s: no accept_length", row["path"])
            continue
        ci = (row["ci_low"], row["ci_high"]) if is_number(row["ci_low"]) else None
        figures.append(
            BaselineFigure(
                label=row["label"] or row["run_id"],
                accept_length=float(row["accept_length"]),
                ci=ci,
                accuracy=row["accuracy"] if is_number(row["accuracy"]) else None,
                source=row["source"],
                engine=row["build.engine"],
                path=row["path"],
            )
        )
    return sorted(figures, key=lambda f: f.accept_length)
