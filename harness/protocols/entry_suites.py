"""A suite whose workload entries are a protocol's points, and each entry's outcome: what a
concurrency sweep (`sweep.py`) and a workload grid (`grid.py`) both derive and read.

Both protocols run their points as workload entries of one launch (`run_suite`), so the
derived suite is validated as any suite is (a soak's and a forced point's suite too), and
each entry's verdict is read off its run record, an entry without one being an error, never
a pass.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from pydantic import ValidationError

from harness.errors import BadInput
from harness.results.record import RunRecord, VerdictStatus
from harness.suite.model import LoadedSuite, Suite, format_validation_error
from harness.suite.schema import document_sha256

if TYPE_CHECKING:
    from harness.suite.entries import Floors


def derived_suite(loaded: LoadedSuite, document: dict[str, object], what: str) -> LoadedSuite:
    """`document` (a copy of `loaded`'s, its entries set) as a loaded suite; BadInput
    naming `loaded.path (what)` and the field when it does not validate."""
    try:
        derived = Suite.model_validate(document)
    except ValidationError as error:
        raise BadInput(format_validation_error(f"{loaded.path} ({what})", error)) from None
    return LoadedSuite(suite=derived, path=loaded.path, sha256=document_sha256(document),
                       document=document)


@dataclass(kw_only=True)
class EntryRun:
    """An entry as measured (a sweep's point, a grid's cell): its series and floors, its run
    folder and record (None when it has none); its verdict is read off that record, an entry
    without one being an error."""

    series: str
    floors: Floors
    run_dir: Path | None = None
    record: RunRecord | None = None
    noun: ClassVar[str]  # what an entry is, as a reason names it

    @property
    def status(self) -> VerdictStatus:
        """The entry's verdict; "error" when it has no record or no verdict."""
        verdict = self.record.verdict if self.record else None
        return verdict.status if verdict else "error"

    @property
    def reasons(self) -> list[str]:
        """The entry's verdict reasons; without a record, that the entry never ran."""
        verdict = self.record.verdict if self.record else None
        return list(verdict.reasons) if verdict else [f"no record: the {self.noun} never ran"]

    def unmeasured(self) -> str | None:
        """Why the entry has no figure a gate can pair (no record, or its run ended in an
        error); None when it has one."""
        record = self.record
        if record is None or self.run_dir is None:
            return "no record"
        measurement = record.measurement
        if measurement is None or measurement.partial or self.status == "error":
            return f"its run ended in an error ({'; '.join(self.reasons[:1])})"
        return None
