"""Any text a record may hold becomes text on the page: labels, reasons, specs and series
names from hypothesis, written through the writer, published, never markup, never a crash."""

from __future__ import annotations

import html
import re
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.publish.site import build_site
from tests.publish.history import night

TEXT = st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\x00"),
               min_size=1, max_size=80)
MARKUP = st.sampled_from(["<script>x()</script>", "<img src=x onerror=y()>", "</td></tr>",
                          "\"'><svg onload=z()>", "{{ 7*7 }}", "{% raw %}", "&amp;", "$x$"])
SERIES = st.text(st.sampled_from("ab._-<>&'\" é"), min_size=1, max_size=20).filter(
    lambda name: name not in (".", "..") and not name.startswith("."))


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(series=SERIES, label=st.one_of(TEXT, MARKUP), reason=st.one_of(TEXT, MARKUP),
       spec=st.one_of(TEXT, MARKUP))
def test_any_record_text_is_text(series: str, label: str, reason: str, spec: str) -> None:
    with tempfile.TemporaryDirectory() as folder:
        root, out = Path(folder) / "results", Path(folder) / "site"
        for day in range(3):
            night(root, day=day, accept=2.5 - 0.5 * (day == 2), series=series, label=label,
                  reasons=[reason], spec=spec)
        build_site(root, out)
        pages = list(out.rglob("*.html"))
        assert len(pages) == 1 + 1 + 1 + 3  # overview, regressions, suite, runs
        for page in pages:
            text = page.read_text(encoding="utf-8")
            body = re.sub(r"<svg.*?</svg>", "", text, flags=re.S)
            tags = set(re.findall(r"<([a-zA-Z][a-zA-Z0-9]*)", body))
            assert tags <= {"html", "head", "meta", "title", "link", "body", "nav", "a", "main",
                            "footer", "code", "h1", "h2", "p", "span", "b", "table", "thead",
                            "tbody", "tr", "th", "td", "br", "ul", "li", "figure", "pre",
                            "details", "summary", "figcaption"}, (page, tags)
            assert "<script" not in text and "onerror=" not in text.replace("onerror=y()", "")
            svg_text = " ".join(re.findall(r"<svg.*?</svg>", text, flags=re.S))
            assert "<script" not in svg_text and "<img" not in svg_text
        overview = (out / "index.html").read_text(encoding="utf-8")
        assert series in html.unescape(re.sub(r"<[^>]+>", "", overview))
