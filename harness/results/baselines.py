"""Baselines: runs of record with `kind = "baseline"`, each saying where its figure came from.

They live in `results/baselines/<suite>--<label>.json` (docs/run-record.md): external
figures (SGLang PR #34524's 5.27 and 5.62) and figures measured here, marked as such.
Each is read through the door (`harness.results.readers`), as every record is.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from harness.files import atomic_write_text, default_results_dir
from harness.results.layout import BASELINES_DIR
from harness.results.readers import read_record
from harness.results.rows import Skip, row_number, row_text
from harness.results.skips import report, reporting

if TYPE_CHECKING:
    from harness.results.record import RunRecord


def baseline_path(root: Path, suite: str, label: str) -> Path:
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in label)
    return Path(root) / BASELINES_DIR / f"{suite}--{safe}.json"


def save_baseline(root: Path, record: RunRecord) -> Path:
    if record.kind != "baseline" or not record.label:
        raise ValueError("a baseline record needs kind='baseline' and a label")
    path = baseline_path(root, record.suite.name, record.label)
    atomic_write_text(path, record.model_dump_json(indent=2, exclude_none=True) + "\n", root)
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
    metric: str = "per_request"  # the definition of accept_length (docs/run-record.md)
    external: bool = False  # a hand-entered figure from elsewhere, not measured here
    # the protocol it was measured in when not the suite entry's: drawn apart, labelled,
    # never gated on (suite `baselines.protocol`)
    protocol: str | None = None

    @property
    def shown_label(self) -> str:
        """Its label as a plot or the site shows it: another protocol named."""
        return shown_label(self.label, self.protocol)


def shown_label(label: str, protocol: str | None) -> str:
    """A baseline's label as every place that shows one shows it (plots, the site, the
    run's plan, the nightly summary): the other protocol it was measured in named."""
    return label if protocol is None else f"{label} [other protocol: {protocol}, not gated]"


def figure_of(row: Mapping[str, object]) -> BaselineFigure | None:
    """A loader row (`rows.flatten_record`) as a figure; None if it has no figure."""
    accept_length, low, high = (row_number(row, key) for key in ("accept_length", "ci_low",
                                                              "ci_high"))
    if accept_length is None:
        return None
    return BaselineFigure(
        label=row_text(row, "label") or row_text(row, "run_id") or "",
        accept_length=accept_length,
        ci=(low, high) if low is not None and high is not None else None,
        accuracy=row_number(row, "accuracy"),
        source=row_text(row, "source"),
        engine=row_text(row, "build.engine"),
        path=row_text(row, "path") or "",
        metric=row_text(row, "metric") or "per_request",
        external=bool(row["external"]),
    )


def load_baselines(root: Path | str | None, suite_name: str) -> list[BaselineFigure]:
    """The baseline records of one suite, ordered by accept length (reads baselines/ only).
    Unusable files are reported (once per command) and skipped."""
    folder = (Path(root) if root is not None else default_results_dir()) / BASELINES_DIR
    skipped: list[str] = []
    figures = []
    with reporting():
        try:
            names = sorted(os.listdir(folder)) if folder.is_dir() else []
        except OSError as error:  # unreadable: one line, no baselines
            report(skipped, folder, f"cannot read: {error.strerror or error}")
            names = []
        for name in names:
            file = folder / name
            if name.startswith(".") or not name.endswith(".json") or not file.is_file():
                continue  # reported by the bulk loader, which reads every file
            try:
                row = read_record(file)[0].row
            except FileNotFoundError:
                continue
            except Skip as why:
                report(skipped, file, str(why))
                continue
            if row["suite"] != suite_name or row["kind"] != "baseline":
                continue
            figure = figure_of(row)
            if figure is None:
                report(skipped, file, "baseline without an accept_length")
                continue
            figures.append(figure)
    return sorted(figures, key=lambda f: f.accept_length)
