"""What the site shows, gathered from the checked loader and the trend detector.

Every figure comes from the loader (`harness.results.store.load_runs`, for the rows) and
the door (`harness.results.readers.read_run`, for the records a page shows in full:
provenance, categories, positions, the paired finding); nothing here opens a run.json. A
line's latest status is an error when a run folder newer than its latest record has no
readable record (a harness killed before it wrote run.json, a damaged run.json). Steps
are `harness.analysis.trend`'s, on the same history `harness trend` analyses (per series
and line, the latest suite document, its window).
"""

from __future__ import annotations

import hashlib
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.analysis.paired_report import Latest, PairedRow, row
from harness.analysis.plot_style import document_metric
from harness.analysis.plots import suite_baselines
from harness.analysis.trend import Step, Trend, TrendParams, analyse, suite_history
from harness.builds.spec import RELEASE, split_git_url
from harness.errors import BadInput
from harness.results.readers import read_run
from harness.results.store import latest_unrecorded, load_runs
from harness.secrets import redact_text

if TYPE_CHECKING:
    import pandas as pd

    from harness.results.baselines import BaselineFigure
    from harness.results.record import RunRecord
    from harness.results.store import UnrecordedRun

UNLABELLED = "(no label)"
LINE_ORDER = ("main", "release")  # the nightly's two builds first, then others by name
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def slug(text: str, limit: int = 60) -> str:
    """A file name for any text: safe characters only, distinct texts distinct names."""
    safe = _UNSAFE.sub("_", text).strip("._") or "_"
    if safe == text and len(safe) <= limit:
        return safe
    return f"{safe[:limit]}-{hashlib.sha256(text.encode()).hexdigest()[:8]}"


def line_of(label: object) -> str:
    return label if isinstance(label, str) and label else UNLABELLED


def _line_key(name: str) -> tuple[int, str]:
    return (LINE_ORDER.index(name) if name in LINE_ORDER else len(LINE_ORDER)
            + (name == UNLABELLED), name)  # fmt: skip


def spec_at(spec: str | None, sha: str | None) -> str | None:
    """A build spec pinned to the commit a run resolved (what `harness bisect` takes)."""
    if not spec or not sha or "==" in spec or RELEASE.fullmatch(spec):
        return spec  # a release names no commit of a repository
    if spec.startswith("git+"):
        url, _ref, fragment = split_git_url(spec)
        return f"git+{url}@{sha}{fragment}"
    if spec.startswith("reference:") and "=" in spec:
        return spec  # engine settings, no repository
    base = spec.rpartition("@")[0] if "@" in spec else spec
    return f"{base}@{sha}"


# Where a forge shows one commit: host -> path after the repository (GitHub, GitLab,
# Codeberg/Gitea). Other hosts: the commit is shown, not linked.
COMMIT_PATHS = {"github.com": "commit", "gitlab.com": "-/commit", "codeberg.org": "commit"}


def commit_url(spec: str | None, sha: str | None) -> str | None:
    """The web page of the commit a run built, when its build is a git ref on a forge
    the site knows (`git+https://github.com/org/repo@main` and a resolved sha); never
    with credentials from the URL."""
    if not spec or not sha or not spec.startswith("git+") or not re.fullmatch(
            r"[0-9a-f]{7,64}", sha):
        return None
    url, _ref, _fragment = split_git_url(spec)
    scheme, _, rest = url.partition("://")
    if scheme not in ("https", "http") or not rest:
        return None
    host, _, path = rest.partition("/")
    host = host.rpartition("@")[2].lower()  # user:token@host: the host alone
    kind = COMMIT_PATHS.get(host)
    path = path.removesuffix("/").removesuffix(".git")
    if kind is None or path.count("/") < 1:
        return None
    return f"https://{host}/{path}/{kind}/{sha}"


@dataclass
class StepView:
    """A step the detector found in one line, with the runs either side."""

    step: Step
    before: dict[str, object]  # the loader's row of the last run before the step
    after: dict[str, object]  # and of the first run after it
    is_open: bool  # the drop that raises the alarm
    bisect: str | None  # the command to find the commit (drops between two commits)

    @property
    def is_drop(self) -> bool:
        return self.step.is_drop


@dataclass
class LineView:
    """One line of a series (a build label: main, release, ...)."""

    name: str
    runs: pd.DataFrame  # every run of the line, oldest first
    history: pd.DataFrame  # what the trend analyses
    trend: Trend
    steps: list[StepView]
    latest: dict[str, object]  # the latest run's row (whatever its verdict)
    change: float | None  # since the run before, complete runs only
    paired: PairedRow | None  # the latest run's paired finding (paired_report row)
    # a run folder of the series newer than `latest` without a readable record (its line
    # is unknown: it counts for every line it is newer than)
    unrecorded: UnrecordedRun | None = None

    @property
    def status(self) -> str | None:
        """The line's latest verdict; "error" when its newest run has no record."""
        if self.unrecorded is not None:
            return "error"
        verdict = self.latest.get("verdict")
        return verdict if isinstance(verdict, str) else None


@dataclass
class SeriesView:
    """A suite or a workload entry (`<suite>.<entry>`), with its lines."""

    name: str
    suite: str  # the suite to name on a command line (an entry's suite)
    entry: str | None
    slug: str
    metric: str  # the definition the floors and baselines are in
    floor: float | None
    baselines: list[BaselineFigure]
    lines: list[LineView]
    latest: RunRecord | None  # the latest record (its document names floors, baselines)
    records: dict[str, RunRecord] = field(default_factory=dict)  # run path -> record

    def latest_record(self, line: LineView) -> RunRecord | None:
        return self.records.get(str(line.latest["path"]))


@dataclass
class Site:
    results: Path
    series: list[SeriesView]
    pages: dict[str, str]  # run path -> its page, relative to the site root
    skipped: list[str]  # what the loader skipped (path: reason)
    params: TrendParams
    n_runs: int

    def regressions(self) -> list[tuple[SeriesView, LineView, StepView]]:
        """Every open drop (the one that raises each line's alarm), newest first."""
        found = [(series, line, view) for series in self.series for line in series.lines
                 for view in line.steps if view.is_open]
        return sorted(found, key=lambda item: str(item[2].after.get("started_at")),
                      reverse=True)


def _read(path: str, records: dict[str, RunRecord], skipped: list[str]) -> RunRecord | None:
    if path not in records:
        try:
            records[path] = read_run(Path(path))
        except BadInput as error:  # changed since it was loaded: shown without a page
            skipped.append(str(error))
            return None
    return records[path]


def _paired(record: RunRecord | None) -> PairedRow | None:
    if record is None or record.paired is None:
        return None
    return row(record.suite.name, Latest(Path("."), record))  # the door checked its finding


def _steps(series: str, suite: str, history: pd.DataFrame, trend: Trend) -> list[StepView]:
    views = []
    for step in trend.steps:
        before = history.iloc[step.index - 1].to_dict()
        after = history.iloc[step.index].to_dict()
        good = spec_at(_text(before["build.spec"]), _text(before["build.git_sha"]))
        bad = spec_at(_text(after["build.spec"]), _text(after["build.git_sha"]))
        command = None
        if step.is_drop and good and bad and good != bad:
            command = "harness bisect " + " ".join(
                shlex.quote(redact_text(part)) for part in (suite, "--good", good, "--bad", bad))
        views.append(StepView(step, before, after, step is trend.open_drop, command))
    return views


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _page_runs(line_runs: pd.DataFrame, steps: Sequence[StepView], keep: int) -> list[str]:
    paths = list(line_runs["path"].tail(keep)) if keep else []
    for view in steps:
        paths += [view.before["path"], view.after["path"]]
    return list(dict.fromkeys(paths))


def gather(results: Path, params: TrendParams | None = None, run_pages: int = 10,
           labels: Sequence[str] | None = None) -> Site:  # fmt: skip
    """The site's content: every series and line of `results` (runs labelled `labels`
    only, when given), each line's latest `run_pages` runs and its step ends with pages."""
    params = params or TrendParams()
    runs = load_runs(results)
    skipped = list(runs.attrs.get("skipped", []))
    unrecorded = runs.attrs.get("unrecorded", [])
    measured = runs[runs["kind"] == "run"]
    if labels:
        measured = measured[measured["label"].isin(list(labels))]
    pages: dict[str, str] = {}
    views = []
    for name in sorted(measured["suite"].unique()):
        rows = measured[measured["suite"] == name]
        records: dict[str, RunRecord] = {}
        latest = _read(str(rows["path"].iloc[-1]), records, skipped)
        document = latest.suite.document if latest is not None else {}
        version = latest.schema_version if latest is not None else 2
        base = found if isinstance(found := document.get("name"), str) else name
        metric = document_metric(document, version)
        floors = rows["floor"].dropna()
        series = SeriesView(
            name=name, suite=base, entry=latest.suite.entry if latest is not None else None,
            slug=slug(name), metric=metric,
            floor=float(floors.iloc[-1]) if len(floors) else None,
            baselines=suite_baselines(name, document, version, results), lines=[],
            latest=latest, records=records)  # fmt: skip
        line_names = sorted({line_of(label) for label in rows["label"]}, key=_line_key)
        for line in line_names:
            line_runs = rows[[line_of(label) == line for label in rows["label"]]]
            history = suite_history(line_runs, name, params.window, params.include_incomplete)
            trend = analyse(history, name, params)
            steps = _steps(name, base, history, trend)
            change = None
            if len(history) >= 2:
                change = float(history["accept_length"].iloc[-1]
                               - history["accept_length"].iloc[-2])  # fmt: skip
            last = line_runs.iloc[-1].to_dict()
            view = LineView(line, line_runs, history, trend, steps, last, change,
                            _paired(_read(str(last["path"]), records, skipped)),
                            latest_unrecorded(unrecorded, name, last["started_at"]))
            series.lines.append(view)
            for path in _page_runs(line_runs, steps, run_pages):
                if _read(str(path), records, skipped) is not None:
                    folder = Path(str(path)).name
                    pages[str(path)] = f"runs/{series.slug}/{slug(folder)}.html"
        views.append(series)
    return Site(Path(results), views, pages, skipped, params, len(measured))
