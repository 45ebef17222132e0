"""What every protocol's record shares (a concurrency sweep's `sweeps.py`, a forced
ladder's `forced.py`, a workload grid's `grid.py`, a soak's `soaks.py`): the model's rules
(no undeclared field, frozen), the schema's version as the first field, the record's
folder and its atomic write. Each is read back through the door (`harness.results.readers`:
`read_protocol_record`, `read_forced`, `read_soak`). Each record's module keeps only its
own fields and names its files once:

    results/<folder>/<suite>/<UTC time>-<id>/<file>   the record
    results/<folder>/<suite>/<UTC time>-<id>/<plot>   its plot
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from harness.results.layout import new_record_folder, write_record_file

SCHEMA_VERSION = 1  # each protocol's record; one that changes overrides `schema_version`


class ProtocolModel(BaseModel):
    """A part of a protocol's record: no field it does not declare, never changed once made."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class ProtocolRecord(ProtocolModel):
    """A protocol's record: the schema's version first in its JSON, then its own fields."""

    schema_version: int = SCHEMA_VERSION


@dataclass(frozen=True)
class RecordFiles:
    """Where one protocol keeps its records: `results/<folder>/...`, the record's `file`
    and its `plot` in each record's folder; `what` names the record in a refusal."""

    folder: str
    file: str
    plot: str
    what: str

    def new_folder(self, results: Path, suite: str, started_at: datetime,
                   record_id: str) -> Path:
        """The record's folder, created exclusively (two records never share one)."""
        return new_record_folder(results, self.folder, suite, started_at, record_id)

    def write(self, folder: Path, record: ProtocolRecord, results: Path) -> Path:
        return write_record_file(folder / self.file, record, results)

    def save(self, record: ProtocolRecord, results: Path, suite: str, started_at: datetime,
             record_id: str) -> Path:
        """`record` written into a new folder of its own (`new_folder`); that folder."""
        folder = self.new_folder(results, suite, started_at, record_id)
        self.write(folder, record, results)
        return folder
