"""Render the site (jinja2, every text autoescaped) and write it as one folder.

Layout: `index.html` (every series and line), `suites/<series>.html` (history, steps,
panels, recent runs), `runs/<series>/<run>.html` (provenance, figures, files),
`style.css`. Links are relative, so the folder works from file:// and any static host;
the pages hold no script and their Content-Security-Policy allows none. The folder is
built beside `out` and swapped in, so a host never serves half a site.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import jinja2
from markupsafe import Markup

from harness import __version__
from harness.analysis.paired_report import finding_line
from harness.analysis.plot_style import category_floor_checks, position_floor_checks
from harness.analysis.trend import TrendParams
from harness.engines.registry import secret_flags
from harness.errors import BadInput
from harness.publish import charts
from harness.publish.chart_data import categories_data, history_data, positions_data
from harness.publish.feed import FEED_FILE, PAGE_FILE, drop_summary, regressions_feed
from harness.publish.model import SeriesView, Site, commit_url, gather, line_of
from harness.secrets import redact_argv, redact_env, redact_text

if TYPE_CHECKING:
    from harness.results.record import RunRecord

MARKER = ".harness-site"  # marks a folder this command wrote (and may replace)
TEMPLATES = Path(__file__).parent / "templates"
DEFINITIONS = {
    "server_avg": "(Σ correct drafts + Σ verify steps) / Σ verify steps, SGLang's "
                  "/server_info figure",
    "per_request": "Σ completion tokens / Σ verify steps, over requests with a verify step",
    "per_request_mean": "mean over requests of 1 + accepted / drafts (1 with no draft), "
                        "vLLM's reference-acceptance test",
    "spec_accept_length_mean": "mean over requests of completion tokens / verify steps, "
                               "the DFlash benchmark's SGLang figure",
}


@dataclass(frozen=True)
class Built:
    out: Path
    pages: int
    bytes: int
    series: int
    runs: int
    skipped: int


# ---------------------------------------------------------------- formatting


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value)) or \
        value.__class__.__name__ == "NaTType"  # fmt: skip


def _num(value: Any, digits: int = 4) -> str:
    if _missing(value) or not isinstance(value, int | float):
        return "–"
    return f"{value:.{digits}f}"


def _signed(value: Any, digits: int = 3) -> str:
    return "–" if _missing(value) or not isinstance(value, int | float) else f"{value:+.{digits}f}"


def _when(value: Any) -> str:
    if _missing(value):
        return "–"
    text: str = value.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return text


def _day(value: Any) -> str:
    return "–" if _missing(value) else value.astimezone(UTC).strftime("%Y-%m-%d")


def _short(value: Any) -> str:
    return value[:12] if isinstance(value, str) and value else "–"


def _redact(value: Any) -> str:
    return redact_text(value) if isinstance(value, str) and value else ""


def _finalize(value: Any) -> Any:
    """Every value a template prints, redacted before it is escaped (an escaped `&` would
    no longer spell a registered value); markup (the charts) stays markup."""
    if isinstance(value, Markup):
        return Markup(redact_text(str(value)))
    return redact_text(value) if isinstance(value, str) else value


def _pair(values: Any) -> str:
    if not values or len(values) != 2 or any(_missing(v) for v in values):
        return "–"
    return f"{values[0]:.3f}–{values[1]:.3f}"


def _row_ci(row: dict[str, Any]) -> str:
    return _pair((row.get("ci_low"), row.get("ci_high")))


def _commit_url(spec: Any, sha: Any) -> str | None:
    return commit_url(spec if isinstance(spec, str) else None,
                      sha if isinstance(sha, str) else None)


def _size(count: int) -> str:
    size = float(count)
    for unit in ("B", "KiB", "MiB"):
        if size < 1024 or unit == "MiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return ""


def environment() -> jinja2.Environment:
    """Autoescaping everywhere: a record's text is text, whatever it holds."""
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True,
                             lstrip_blocks=True, finalize=_finalize)  # fmt: skip
    env.filters.update(num=_num, signed=_signed, when=_when, day=_day, short=_short,
                       redact=_redact)  # fmt: skip
    env.globals.update(ci=_row_ci, pair=_pair, commit_url=_commit_url)
    return env


# ---------------------------------------------------------------- run pages


def _facts(record: RunRecord) -> list[tuple[str, list[tuple[str, str]]]]:
    """The run page's tables: measurement, engine build, harness, host, data."""
    build, prov, m = record.build, record.provenance, record.measurement
    work = record.workload

    def text(value: Any) -> str:
        if _missing(value) or value == "" or value == {} or value == []:
            return "–"
        if isinstance(value, bool):
            return "yes" if value else "no"
        if isinstance(value, float):
            return _num(value, 4)
        if isinstance(value, dict):
            return ", ".join(f"{k}={v}" for k, v in value.items())
        return _redact(str(value))

    sections = []
    if m is not None:
        sections.append(("Measurement", [
            ("definition", f"{m.metric}: {DEFINITIONS.get(m.metric, '')}"),
            ("accept length", _num(m.accept_length)),
            (f"{round(m.ci_level * 100)}% CI", _pair(m.accept_length_ci)),
            ("server_avg", text(m.accept_length_server_avg)),
            ("per_request", text(m.accept_length_per_request)),
            ("per_request_mean", text(m.accept_length_per_request_mean)),
            ("spec_accept_length_mean", text(m.accept_length_spec_accept_length_mean)),
            ("server's own figure", text(m.server_reported_accept_length)),
            ("requests / planned", f"{text(m.n_requests)} / {text(m.n_planned)}"),
            ("prompts", text(m.n_prompts)), ("partial", text(m.partial)),
            ("stopped early", text(m.stopped_early)), ("accuracy", text(m.accuracy)),
            ("verify steps", text(m.verify_steps)),
            ("completion tokens", text(m.completion_tokens)),
            ("duration s", text(m.duration_s))]))  # fmt: skip
    sections.append(("Engine build", [
        ("engine", build.engine), ("spec", text(build.spec)), ("version", text(build.version)),
        ("commit", text(build.git_sha)), ("ref asked for", text(build.ref)),
        ("uncommitted changes", text(build.git_dirty)), ("patch sha256", text(build.patch_sha256)),
        ("source hash", text(build.source_hash)), ("options", text(build.options)),
        ("dependencies sha256", text(build.freeze_sha256)), ("python", text(build.python))]))
    sections.append(("Harness", [
        ("version", prov.harness_version), ("commit", text(prov.harness_git_sha)),
        ("uncommitted changes", text(prov.harness_git_dirty)), ("argv", text(" ".join(
            _argv(prov.argv))))]))  # fmt: skip
    sections.append(("Host", [
        ("hostname", text(prov.hostname)), ("platform", prov.platform), ("python", prov.python),
        ("CPU", text(prov.cpu)), ("CPU count", text(prov.cpu_count)), ("torch", text(prov.torch)),
        ("transformers", text(prov.transformers)), ("CUDA", text(prov.cuda)),
        ("driver", text(prov.driver)), ("GPUs", str(len(prov.gpus))),
        ("environment", text(redact_env(prov.env)))]))  # fmt: skip
    sections.append(("Data and suite", [
        ("data source", text(prov.data_source or (work.data_source if work else None))),
        ("data sha256", text(prov.data_sha256 or (work.data_sha256 if work else None))),
        ("prompts sha256", text(work.prompts_sha256 if work else None)),
        ("workload", text(f"{work.kind} ({work.protocol})" if work else None)),
        ("suite", record.suite.name), ("suite sha256", record.suite.sha256),
        ("seed", text(prov.seed)), ("weights sha256", text(prov.weights_sha256))]))
    return [(heading, [(name, value) for name, value in rows if value != "–"]
             + ([("not recorded", ", ".join(name for name, value in rows if value == "–"))]
                if any(value == "–" for _, value in rows) else []))
            for heading, rows in sections]  # fmt: skip


def _argv(argv: Sequence[str]) -> list[str]:
    return redact_argv(argv, own=True)  # the harness's own command line


def _files(run_dir: Path, page: Path, files_url: str | None, results: Path) -> list[Any]:
    found = []
    try:
        entries = sorted(os.scandir(run_dir), key=lambda entry: entry.name)
    except OSError:
        return []
    for entry in entries:
        if entry.name.startswith(".") or not entry.is_file(follow_symlinks=False):
            continue
        try:
            relative = Path(entry.path).resolve().relative_to(results.resolve())
        except ValueError:  # a run folder linked in from elsewhere: only a local link
            relative = None
        if files_url and relative is not None:
            href = files_url.rstrip("/") + "/" + "/".join(quote(part) for part in relative.parts)
        else:
            href = "/".join(quote(part) for part in
                            Path(os.path.relpath(entry.path, page.parent)).parts)  # fmt: skip
        found.append((entry.name, href, _size(entry.stat(follow_symlinks=False).st_size)))
    return found


def _run_context(site: Site, series: SeriesView, record: RunRecord, path: str, page: Path,
                 files_url: str | None) -> dict[str, Any]:  # fmt: skip
    m = record.measurement
    floors = category_floor_checks(record)
    categories = [(name, result, floors[name].floor if name in floors else None)
                  for name, result in ((m.categories or {}).items() if m else [])]
    position_floors = position_floor_checks(record)
    rates = (m.per_position_acceptance or []) if m else []
    cis = (m.per_position_ci or []) if m else []
    positions = [(k, rate, cis[k - 1] if k <= len(cis) else None,
                  position_floors[k].floor if k in position_floors else None)
                 for k, rate in enumerate(rates, start=1)]  # fmt: skip
    paired_line = finding_line(record.paired) if record.paired is not None else None
    launch = " ".join(redact_argv(record.launch.command, secret_flags(record.build.engine))) \
        if record.launch is not None else None  # fmt: skip
    return {"record": record, "series": series, "line": line_of(record.label),
            "sections": _facts(record), "gpus": record.provenance.gpus,
            "categories": categories, "positions": positions, "paired_line": paired_line,
            "launch": launch, "files": _files(Path(path), page, files_url, site.results)}


# ---------------------------------------------------------------- the site


def build_site(results: Path, out: Path, *, params: TrendParams | None = None,
               run_pages: int = 10, labels: Sequence[str] | None = None,
               files_url: str | None = None, command: str = "harness publish") -> Built:
    """Write the site for `results` to `out` (replacing a site this command wrote there)."""
    results, out, params = Path(results), Path(out), params or TrendParams()
    if not results.is_dir():
        raise BadInput(f"{results}: no results folder")
    if out.exists() and (not out.is_dir() or (any(out.iterdir()) and not (out / MARKER).exists())):
        raise BadInput(f"{out}: exists and is not a site `harness publish` wrote (not replaced)")
    site = gather(results, params, run_pages, labels)
    env = environment()
    common = {"version": __version__, "command": command, "n_runs": site.n_runs,
              "built_at": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"), "params": params,
              "pages": site.pages, "run_pages": run_pages}  # fmt: skip
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    except OSError as error:
        raise BadInput(f"{out}: cannot write the site here: {error.strerror or error}") from None
    try:
        count = _write(site, staging, out, env, common, files_url, charts)
        (staging / MARKER).write_text("written by harness publish; replaced on the next run\n")
        total = sum(f.stat().st_size for f in staging.rglob("*") if f.is_file())
        _swap(staging, out)
    except OSError as error:  # a full disk, a folder turned read-only: nothing half-written
        shutil.rmtree(staging, ignore_errors=True)
        raise BadInput(f"{out}: cannot write the site: {error}") from None
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return Built(out, count, total, len(site.series), site.n_runs, len(site.skipped))


def _write(site: Site, root: Path, final: Path, env: jinja2.Environment,
           common: dict[str, Any], files_url: str | None, charts: Any) -> int:  # fmt: skip
    """Write every page under `root` (links to run files as seen from `final`)."""
    def write(relative: str, template: str, **context: Any) -> None:
        target = root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        depth = relative.count("/")
        text = env.get_template(template).render(**common, root="../" * depth, **context)
        target.write_text(redact_text(text), encoding="utf-8")  # and the page as a whole

    shutil.copyfile(TEMPLATES / "style.css", root / "style.css")
    def write_json(relative: str, data: object) -> str:
        text = json.dumps(data, default=str, allow_nan=False, separators=(",", ":"))
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(redact_text(text) + "\n", encoding="utf-8")
        return relative.rpartition("/")[2]  # linked from its page, in the same folder

    alarms = [(series, line) for series in site.series for line in series.lines
              if line.trend.alarm]  # fmt: skip
    write("index.html", "overview.html", site=site, alarms=alarms)
    write(PAGE_FILE, "regressions.html", regressions=[
        (series, line, view, drop_summary(series, line, view))
        for series, line, view in site.regressions()])
    built_at = datetime.now(UTC)
    (root / FEED_FILE).write_bytes(redact_text(
        regressions_feed(site, built_at).decode("utf-8")).encode("utf-8"))
    count = 2
    for series in site.series:
        with charts.svg_style():
            history = Markup(charts.history_svg(series, site.pages))
            categories = charts.categories_svg(series)
            positions = charts.positions_svg(series)
        definition = DEFINITIONS.get(series.metric, "")
        data = {"history": write_json(f"suites/{series.slug}.history.json",
                                      history_data(series, site.pages, definition))}
        for name, found in (("categories", categories_data(series)),
                            ("positions", positions_data(series))):
            if found is not None:
                data[name] = write_json(f"suites/{series.slug}.{name}.json", found)
        listed = [{**row, "line": line.name} for line in series.lines
                  for row in line.runs.to_dict("records") if row["path"] in site.pages]
        listed.sort(key=lambda row: row["started_at"], reverse=True)
        write(f"suites/{series.slug}.html", "suite.html", series=series, history_svg=history,
              categories_svg=Markup(categories) if categories else None,
              positions_svg=Markup(positions) if positions else None, listed=listed,
              definition=definition, data=data)  # fmt: skip
        count += 1
        for path, record in series.records.items():
            if path not in site.pages:
                continue
            page = final.resolve() / site.pages[path]
            write(site.pages[path], "run.html",
                  **_run_context(site, series, record, path, page, files_url))
            count += 1
    return count


def _swap(staging: Path, out: Path) -> None:
    """Put the new site in place of the old one (a rename each)."""
    old = None
    if out.exists():
        old = out.with_name(f".{out.name}.old-{os.getpid()}")
        out.rename(old)
    staging.rename(out)
    out.chmod(0o755)  # mkdtemp makes 0700; a static host serves others' reads
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
