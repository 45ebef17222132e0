"""A suite's workload entries as run and recorded: the main `[workload]` (series = the
suite's name) and each `[[workloads]]` entry (series `<suite>.<entry>`), each as a suite
of its own (`Entry.loaded`) judged by its own floors."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from harness.errors import BadInput
from harness.suite.entries import ENTRY_KEYS, INHERITED_FLOOR_KEYS
from harness.suite.schema import LoadedSuite, Suite, document_sha256


class Entry(BaseModel):
    """One workload of a suite as it is run and recorded: the main `[workload]` (series
    = the suite's name) or a `[[workloads]]` entry (series `<suite>.<entry>`).

    `loaded` is the suite as this entry runs it: its workload, floors and baselines in
    the places of the suite's own, `workloads` dropped, named after the series. Its
    document is what the entry's record keeps, so every reader of a record (floors,
    baselines, history per document hash) sees one workload judged by one set of floors;
    adding an entry to a suite leaves the main series' document, and so its history, as
    it was.
    """

    model_config = ConfigDict(frozen=True)

    series: str
    name: str | None
    loaded: LoadedSuite


def series_name(suite_name: str, entry: str | None) -> str:
    return suite_name if entry is None else f"{suite_name}.{entry}"


def suite_entries(loaded: LoadedSuite, only: list[str] | None = None) -> list[Entry]:
    """The suite's workloads in order (main first); `only`: entry names to keep ("main"
    names the main workload). BadInput naming the known entries when one is unknown."""
    suite, document = loaded.suite, loaded.document
    known = ["main", *(entry.name for entry in suite.workloads)]
    unknown = [name for name in only or [] if name not in known]
    if unknown:
        raise BadInput(f"suite {suite.name}: no workload entry {', '.join(unknown)}; "
                       f"it has: {', '.join(known)}")
    base = {k: v for k, v in document.items() if k != "workloads"}
    chosen: list[Entry] = []
    if not only or "main" in only:
        chosen.append(_entry(loaded, suite.name, None, base, suite.model_copy(
            update={"workloads": []})))
    raw_entries = document.get("workloads")
    for entry, raw in zip(suite.workloads, raw_entries if isinstance(raw_entries, list) else [],
                          strict=True):
        if only and entry.name not in only:
            continue
        series = series_name(suite.name, entry.name)
        inherited = _table(document.get("floors"))
        floors = {**{k: inherited[k] for k in INHERITED_FLOOR_KEYS if k in inherited},
                  **raw["floors"]}
        effective = {**base, "name": series,
                     "workload": {k: v for k, v in raw.items() if k not in ENTRY_KEYS},
                     "floors": floors, "baselines": list(raw.get("baselines") or [])}
        changed = suite.model_copy(update={"name": series, "workload": entry,
                                           "floors": entry.floors,
                                           "baselines": list(entry.baselines),
                                           "workloads": []})
        chosen.append(_entry(loaded, series, entry.name, effective, changed))
    return chosen


def _table(value: object) -> dict[str, object]:
    """A TOML table of the (validated) suite document; an absent one is empty."""
    return value if isinstance(value, dict) else {}


def _entry(loaded: LoadedSuite, series: str, name: str | None, document: dict[str, object],
           suite: Suite) -> Entry:
    effective = LoadedSuite(suite=suite, path=loaded.path, sha256=document_sha256(document),
                            document=document)
    return Entry(series=series, name=name, loaded=effective)


def series_names(suite: Suite) -> list[str]:
    """The record series a run of the suite writes (`harness trend`, the nightly)."""
    return [suite.name, *(series_name(suite.name, e.name) for e in suite.workloads)]
