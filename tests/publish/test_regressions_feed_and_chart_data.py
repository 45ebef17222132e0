"""Issue 51, the site for people who follow it: a page and an Atom feed of the open
regressions, each night's value and CI under the pointer, a run's build linked to its
commit, each chart's data as JSON beside it, a legend that covers no point.

The history is the issue's (4 nights of one build at 3.8465, 3 of another at 3.6870,
identical answers per build) as records with per-question rows written by the project's
writer, the builds git refs of a GitHub repository with the commit each resolved.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path
from xml.etree import ElementTree

import pytest

from harness.cli import main
from harness.publish.charts import history_figure, svg_style
from harness.publish.model import commit_url, gather
from harness.results.store import load_runs
from tests.analysis.test_trend_by_question import START, answers
from tests.results.records import make_night

ATOM = "{http://www.w3.org/2005/Atom}"
REPO = "git+https://github.com/sgl-project/sglang"
GOOD, BAD = "1" * 40, "2" * 40
SUITE = "tiny_dflash_cpu"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    results = tmp_path_factory.mktemp("results")
    default, steps = answers(3.8465, 1)
    noisy, _ = answers(3.6870, 1)
    nights = [(f"{REPO}@main", GOOD, default)] * 4 + [(f"{REPO}@main", BAD, noisy)] * 3
    for i, (spec, sha, tokens) in enumerate(nights):
        make_night(results, tokens, steps, START.replace(day=1 + i), spec=spec, git_sha=sha)
    out = tmp_path_factory.mktemp("site") / "site"
    assert main(["publish", "--results", str(results), "--out", str(out)]) == 0
    return results, out


def test_the_regressions_page_lists_the_open_drop(site: tuple[Path, Path]) -> None:
    _, out = site
    page = (out / "regressions.html").read_text()
    [row] = re.findall(r'<tr class="drop".*?</tr>', page, flags=re.S)
    assert f'data-series="{SUITE}"' in row and "2026-11-05" in row  # the new build's night
    assert "3.8465 → 3.6870" in row and "-0.1596 (-4.1%)" in row
    assert f"/commit/{BAD}" in row and "by question" in row
    assert 'href="regressions.atom"' in (out / "index.html").read_text()


def test_the_feed_is_valid_atom_with_one_entry_per_open_drop(site: tuple[Path, Path]) -> None:
    _, out = site
    feed = ElementTree.parse(out / "regressions.atom").getroot()
    assert feed.tag == f"{ATOM}feed"
    for required in ("id", "title", "updated", "author"):  # RFC 4287 4.1.1
        assert feed.find(f"{ATOM}{required}") is not None, required
    datetime.fromisoformat(feed.findtext(f"{ATOM}updated").replace("Z", "+00:00"))
    [entry] = feed.findall(f"{ATOM}entry")
    for required in ("id", "title", "updated", "summary"):  # 4.1.2
        assert entry.findtext(f"{ATOM}{required}"), required
    assert entry.findtext(f"{ATOM}id").startswith("tag:spec-harness,2026:drop/")
    assert entry.findtext(f"{ATOM}updated").startswith("2026-11-05T")
    assert "-4.1%" in entry.findtext(f"{ATOM}title")
    link = entry.find(f"{ATOM}link")
    assert link is not None and (out / link.get("href")).is_file()


def test_each_point_shows_its_value_and_ci_under_the_pointer(
        site: tuple[Path, Path]) -> None:
    results, out = site
    page = (out / "suites" / f"{SUITE}.html").read_text()
    svg = page[page.index("<svg"):page.index("</svg>")]
    titles = re.findall(r"<title>(nightly [^<]*)</title>", svg)
    runs = load_runs(results)
    assert len(titles) == len(runs) == 7
    for title, row in zip(sorted(titles), runs.sort_values("started_at").itertuples(),
                          strict=True):
        assert f"accept length {row.accept_length:.4f}" in title
        assert f"95% CI {row.ci_low:.4f}, {row.ci_high:.4f}" in title


def test_each_run_links_to_its_builds_commit(site: tuple[Path, Path]) -> None:
    _, out = site
    pages = sorted((out / "runs" / SUITE).glob("*.html"))
    linked = [re.search(r'id="build-commit" href="([^"]+)"', p.read_text()) for p in pages]
    assert [m.group(1).rsplit("/", 1)[1] for m in linked if m] == [GOOD] * 4 + [BAD] * 3
    assert all(m.group(1).startswith("https://github.com/sgl-project/sglang/commit/")
               for m in linked if m)


def test_a_commit_link_needs_a_git_ref_on_a_known_forge_and_drops_credentials() -> None:
    assert commit_url("git+https://oauth2:tok@github.com/o/r.git@main", "abc1234") == \
        "https://github.com/o/r/commit/abc1234"
    assert commit_url("git+https://gitlab.com/g/r@v1", "abc1234") == \
        "https://gitlab.com/g/r/-/commit/abc1234"
    assert commit_url("git+https://git.example.org/o/r@main", "abc1234") is None
    assert commit_url("sglang==0.5.23", "abc1234") is None
    assert commit_url("git+https://github.com/o/r@main", "not a sha") is None
    assert commit_url("git+https://github.com/o/r@main", None) is None


def test_each_chart_has_its_data_beside_it(site: tuple[Path, Path]) -> None:
    results, out = site
    page = (out / "suites" / f"{SUITE}.html").read_text()
    [href] = re.findall(r'class="data" href="([^"]+)"', page)
    data = json.loads((out / "suites" / href).read_text())
    assert data["metric"] == "per_request" and "verify steps" in data["definition"]
    [line] = data["lines"]
    runs = load_runs(results).sort_values("started_at")
    nights = [dict(zip(data["columns"], night, strict=True)) for night in line["nights"]]
    assert [n["accept_length"] for n in nights] == pytest.approx(
        list(runs["accept_length"]), abs=5e-5)  # to 4 decimals, as the pages show
    assert [n["ci_low"] for n in nights] == pytest.approx(list(runs["ci_low"]), abs=5e-5)
    assert [n["run_id"] for n in nights] == list(runs["run_id"])
    assert [n["commit"] for n in nights] == [GOOD] * 4 + [BAD] * 3
    [build] = data["builds"]
    assert build["build"] == f"{REPO}@main"
    assert build["commit_url"].format(commit=BAD) == \
        f"https://github.com/sgl-project/sglang/commit/{BAD}"
    [step] = line["steps"]
    assert step["open"] and step["delta"] == pytest.approx(3.6870 - 3.8465, abs=1e-4)
    assert line["judged_by"] == "by question"


def test_the_legend_covers_no_point(site: tuple[Path, Path]) -> None:
    results, _ = site
    series = next(s for s in gather(results).series if s.name == SUITE)
    with svg_style():
        figure, _ = history_figure(series, {})
        renderer = figure.canvas.get_renderer()
        figure.draw(renderer)
    [axes] = figure.axes
    [legend] = figure.legends
    box, plot = legend.get_window_extent(renderer), axes.get_window_extent(renderer)
    assert box.x0 >= plot.x1 or box.y1 <= plot.y0  # beside or below the axes, not on them
