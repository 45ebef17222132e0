"""The open regressions as an Atom feed (RFC 4287), as asv's feed of regressions gives
its followers: one entry per open drop (`Site.regressions`), the same rows as the
regressions page, so a feed reader tells its user when a drop opens.

Written with ElementTree (every text escaped by the serializer), in the Atom namespace;
links are relative to the feed (`regressions.atom` beside `regressions.html`), which
Atom allows (IRI references resolved against the feed's location). Ids are tag URIs
(RFC 4151) built from the series, line and first run of the drop: the same drop keeps
its id from one build of the site to the next, so a reader shows it once.
"""

from __future__ import annotations

from datetime import UTC, datetime
from urllib.parse import quote
from xml.etree import ElementTree

from harness.publish.model import LineView, SeriesView, Site, StepView
from harness.secrets import redact_text

ATOM = "http://www.w3.org/2005/Atom"
FEED_FILE = "regressions.atom"
PAGE_FILE = "regressions.html"
ID_PREFIX = "tag:spec-harness,2026:"


def _stamp(moment: object, fallback: datetime) -> str:
    """RFC 3339, as Atom's date constructs require."""
    if isinstance(moment, datetime):
        moment = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
        return moment.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    return fallback.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def drop_summary(series: SeriesView, line: LineView, view: StepView) -> str:
    """One drop in words: where, when, which build, how large, who judged."""
    step = view.step
    relative = step.delta / step.before if step.before else float("nan")
    build = view.after.get("build.spec") or view.after.get("build.engine") or "-"
    was = view.before.get("build.spec") or view.before.get("build.engine") or "-"
    when = _stamp(step.at, datetime.now(UTC))[:10]
    return redact_text(
        f"{series.name} ({line.name}): accept length {step.before:.4f} -> {step.after:.4f} "
        f"({step.delta:+.4f}, {relative:+.1%}) since the night of {when}, run "
        f"{view.after.get('run_id')}, build {build} (before: {was}); z {step.z:.1f}, "
        f"judged {line.trend.judged_by}")


def _element(parent: ElementTree.Element, tag: str, text: str | None = None,
             **attributes: str) -> ElementTree.Element:
    child = ElementTree.SubElement(parent, f"{{{ATOM}}}{tag}", attributes)
    if text is not None:
        child.text = text
    return child


def regressions_feed(site: Site, built_at: datetime) -> bytes:
    """The feed's bytes (UTF-8, with its XML declaration)."""
    ElementTree.register_namespace("", ATOM)
    feed = ElementTree.Element(f"{{{ATOM}}}feed")
    found = site.regressions()
    _element(feed, "id", ID_PREFIX + "regressions")
    _element(feed, "title", "Accept length: open regressions")
    _element(feed, "updated", _stamp(found[0][2].step.at if found else None, built_at))
    author = _element(feed, "author")
    _element(author, "name", "harness publish")
    _element(feed, "link", rel="self", href=FEED_FILE, type="application/atom+xml")
    _element(feed, "link", rel="alternate", href=PAGE_FILE, type="text/html")
    _element(feed, "generator", "spec-harness")
    for series, line, view in found:
        entry = _element(feed, "entry")
        first = str(view.after.get("run_id") or view.step.index)
        _element(entry, "id", ID_PREFIX + "/".join(
            quote(part, safe="") for part in ("drop", series.name, line.name, first)))
        _element(entry, "title", redact_text(
            f"{series.name} ({line.name}): drop {view.step.delta:+.3f} "
            f"({view.step.delta / view.step.before:+.1%})" if view.step.before else
            f"{series.name} ({line.name}): drop {view.step.delta:+.3f}"))
        _element(entry, "updated", _stamp(view.step.at, built_at))
        _element(entry, "link", rel="alternate", type="text/html",
                 href=f"suites/{quote(series.slug)}.html")
        _element(entry, "summary", drop_summary(series, line, view), type="text")
    document: bytes = ElementTree.tostring(feed, encoding="utf-8", xml_declaration=True)
    return document
