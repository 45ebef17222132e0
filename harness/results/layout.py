"""How a results folder is laid out (standard library only); where it is, and how files
are written into it, is `harness.files`'s. Layout (docs/run-record.md):

    results/runs/<suite>/<UTC time>-<run id>/run.json        one run record, written last
    results/runs/<suite>/<UTC time>-<run id>/requests.jsonl  one request row per line
    results/runs/<suite>/.index.jsonl, .index-snapshot.json  the loader's index (a copy)
    results/baselines/<suite>--<label>.json                  baseline records
    results/plots/<suite>/                                   history plots
    results/calibrations/<suite>/<UTC time>-<id>.json        calibration records
    results/.launched/<harness pid>-<start>.json             what a running harness launched

This module is imported at CLI start-up: keep it free of third-party imports.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from harness.files import atomic_write_text, check_inside

if TYPE_CHECKING:
    from pydantic import BaseModel

RUNS_DIR = "runs"
BASELINES_DIR = "baselines"
PLOTS_DIR = "plots"
CALIBRATIONS_DIR = "calibrations"  # <suite>/<UTC time>-<id>.json: `harness calibrate`
LAUNCHED_DIR = ".launched"  # a running harness's ledger (harness.run.lifeline)
RUN_FILE = "run.json"
REQUESTS_FILE = "requests.jsonl"
# [speedup]: the target alone's requests and its server's log, beside the run's own
TARGET_ALONE_FILE = "target-alone.jsonl"
TARGET_ALONE_LOG = "target-alone.log"
INDEX_FILE = ".index.jsonl"  # per suite folder: the loader's index log (harness.results.index)
SNAPSHOT_FILE = ".index-snapshot.json"  # and its snapshot
# a run's figures, drawn into its folder (harness.analysis): named here so the run path
# can list them without loading the plotting libraries
RUN_PNG = "accept_length.png"
HISTOGRAM_PNG = "accept_histogram.png"
LATENCY_PNG = "latency.png"
CATEGORIES_PNG = "categories.png"
RUN_TIME = "%Y%m%dT%H%M%SZ"  # a run folder's name starts with its start time, UTC


def run_dir_name(started_at: datetime, run_id: str) -> str:
    return f"{started_at.strftime(RUN_TIME)}-{run_id}"


def started_from_name(name: str) -> datetime | None:
    """The start time a run folder's name gives (`run_dir_name`), None for another name."""
    try:
        return datetime.strptime(name.partition("-")[0], RUN_TIME).replace(tzinfo=UTC)
    except ValueError:
        return None


def new_record_folder(results: Path, kind: str, suite: str, started_at: datetime,
                      record_id: str) -> Path:
    """`<results>/<kind>/<suite>/<time>-<id>` for a protocol's record (a sweep, a forced
    ladder), created exclusively: two records never share one."""
    folder = Path(results) / kind / suite / run_dir_name(started_at, record_id)
    folder.parent.mkdir(parents=True, exist_ok=True)
    check_inside(folder.parent, results)
    folder.mkdir()
    return folder


def write_record_file(path: Path, record: BaseModel, results: Path) -> Path:
    """A protocol's record as indented JSON, written atomically inside `results`."""
    atomic_write_text(path, record.model_dump_json(indent=2) + "\n", root=results)
    return path
