"""`harness publish`: what the pages say against the records, escaping, bounds, bad input.
(The same site in a real browser: tests/publish_browser.)"""

from __future__ import annotations

import html
import re
import shlex
from pathlib import Path

import pytest

from harness.analysis.trend import TrendParams, analyse, suite_history
from harness.cli import main
from harness.publish.model import slug, spec_at
from harness.publish.site import build_site
from harness.results.readers import read_run
from harness.results.store import load_runs
from tests.publish.history import SGLANG, night, nightly_history

CRAFTED = '<script>document.title="pwned"</script><img src=x onerror=alert(1)>'


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, list[Path]]]:
    root = tmp_path_factory.mktemp("results")
    return root, nightly_history(root)


@pytest.fixture(scope="module")
def site(history: tuple[Path, dict[str, list[Path]]],
         tmp_path_factory: pytest.TempPathFactory) -> Path:  # fmt: skip
    out = tmp_path_factory.mktemp("site") / "site"
    assert main(["publish", "--results", str(history[0]), "--out", str(out)]) == 0
    return out


def row_of(page: str, series: str, line: str) -> dict[str, str]:
    """The overview's cells of one series and line, as text."""
    match = re.search(rf'<tr data-series="{re.escape(html.escape(series))}" '
                      rf'data-line="{re.escape(html.escape(line))}">(.*?)</tr>', page, re.S)
    assert match, (series, line)
    cells = re.findall(r'<td data-field="(\w+)"[^>]*>(.*?)</td>', match.group(1), re.S)
    return {name: html.unescape(re.sub(r"<[^>]+>", "", text)).strip() for name, text in cells}


def test_overview_figures_are_the_records(history, site) -> None:
    _root, made = history
    page = (site / "index.html").read_text()
    for line in ("main", "release"):
        record = read_run(made[line][-1])
        cells = row_of(page, "suite_a", line)
        assert float(cells["accept_length"]) == pytest.approx(record.measurement.accept_length,
                                                              abs=5e-5)
        low, high = (float(v) for v in cells["ci"].split("–"))
        assert (low, high) == pytest.approx(record.measurement.accept_length_ci, abs=5e-4)
        assert float(cells["floor"]) == 2.0
        assert cells["verdict"] == record.verdict.status.upper()
        assert cells["runs"] == str(len(made[line]))
        assert cells["latest_run"] == record.run_id
    assert "PASS" in row_of(page, "suite_a", "main")["paired"]
    assert row_of(page, "suite_a.t06", "main")["runs"] == "3"


def test_change_points_are_trend_s(history, site) -> None:
    root, made = history
    runs = load_runs(root)
    main_runs = runs[runs["label"] == "main"]
    trend = analyse(suite_history(main_runs, "suite_a"), "suite_a", TrendParams())
    assert trend.alarm and len(trend.steps) == 1
    step = trend.steps[0]
    cells = row_of((site / "index.html").read_text(), "suite_a", "main")
    assert cells["trend"].startswith(trend.describe())
    assert f"{step.before:.3f} → {step.after:.3f}" in cells["trend"]
    suite_page = (site / "suites" / "suite_a.html").read_text()
    good, bad = read_run(made["main"][step.index - 1]), read_run(made["main"][step.index])
    expected = shlex.join(["harness", "bisect", "suite_a", "--good",
                           spec_at(SGLANG, good.build.git_sha), "--bad",
                           spec_at(SGLANG, bad.build.git_sha)])
    assert expected in html.unescape(suite_page)
    assert "yes: alarm" in suite_page
    # the release line is steady: no step, no alarm
    assert row_of((site / "index.html").read_text(), "suite_a",
                  "release")["trend"].startswith("stable (by ")  # and which comparison judged


def test_spec_at_pins_the_commit() -> None:
    assert spec_at(SGLANG, "abc") == \
        "git+https://github.com/sgl-project/sglang@abc#subdirectory=python"
    assert spec_at("sglang==0.5.23", "abc") == "sglang==0.5.23"
    assert spec_at("/src/sglang", "abc") == "/src/sglang@abc"
    assert spec_at("/src/sglang@main", "abc") == "/src/sglang@abc"
    assert spec_at("reference:policy=fixed,noise=0.1", "abc") == "reference:policy=fixed,noise=0.1"
    assert spec_at(None, "abc") is None


def test_run_page_has_provenance_and_files(history, site) -> None:
    _root, made = history
    record = read_run(made["main"][-1])
    pages = list((site / "runs" / "suite_a").glob(f"*{record.run_id}.html"))
    assert len(pages) == 1
    page = pages[0].read_text()
    for fact in (record.build.git_sha, record.provenance.harness_git_sha, "NVIDIA H200",
                 record.provenance.data_sha256, "570.86", record.run_id):
        assert fact in page, fact
    hrefs = re.findall(r'<li><a href="([^"]+)">', page)
    assert {Path(h).name for h in hrefs} >= {"run.json", "requests.jsonl"}
    for href in hrefs:  # relative links into the results folder, from the page's folder
        assert (pages[0].parent / href).resolve().is_file(), href
    assert "by category" in page.lower() and "math" in page


def test_history_chart_links_points_to_run_pages(site) -> None:
    page = (site / "suites" / "suite_a.html").read_text()
    links = re.findall(r'<a xlink:href="([^"]+)"', page)
    assert links and all((site / "suites" / link).resolve().is_file() for link in links)
    assert page.count("<svg") == 3  # history, categories, positions


def test_crafted_text_is_text(tmp_path: Path) -> None:
    root = tmp_path / "results"
    baseline = [{"label": CRAFTED, "accept_length": 2.4, "source": CRAFTED}]
    for day in range(3):
        night(root, day=day, accept=2.5, label=CRAFTED, reasons=[CRAFTED], baselines=baseline,
              spec=CRAFTED)
    out = tmp_path / "site"
    build_site(root, out)
    pages = list(out.rglob("*.html"))
    assert len(pages) >= 5
    for page in pages:
        text = page.read_text()
        assert "<script" not in text.lower() and "<img" not in text.lower(), page
    assert "&lt;script&gt;" in (out / "index.html").read_text()
    assert "&lt;script&gt;" in next(out.glob("suites/*.html")).read_text()


def test_secrets_in_a_spec_are_masked(tmp_path: Path) -> None:
    root = tmp_path / "results"
    secret_spec = "git+https://someone:ghp_s3cr3tT0ken@github.com/x/sglang@main"
    for day in range(2):
        night(root, day=day, accept=2.5, spec=secret_spec)
    out = tmp_path / "site"
    build_site(root, out)
    for page in out.rglob("*.html"):
        assert "ghp_s3cr3tT0ken" not in page.read_text(), page


def test_run_pages_are_bounded(history, tmp_path: Path) -> None:
    root, _made = history
    out = tmp_path / "site"
    built = build_site(root, out, run_pages=2)
    pages = {p.name for p in (out / "runs" / "suite_a").glob("*.html")}
    # main: its latest 2 and the runs either side of its step; release: its latest 2
    assert len(pages) == 6
    assert built.pages == 2 + 2 + len(pages) + len(list((out / "runs" / "suite_a.t06").glob("*")))


def test_a_bad_record_is_listed_not_fatal(tmp_path: Path) -> None:
    root = tmp_path / "results"
    night(root, day=0, accept=2.5)
    broken = night(root, day=1, accept=2.5)
    (broken / "run.json").write_text('{"schema_version": 2, "run_id": "x"')
    out = tmp_path / "site"
    assert main(["publish", "--results", str(root), "--out", str(out)]) == 0
    assert "skipped" in (out / "index.html").read_text()
    assert broken.name not in {p.stem for p in out.rglob("*.html")}


def test_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["publish", "--results", str(tmp_path / "none"), "--out",
                 str(tmp_path / "site")]) == 2
    assert "no results folder" in capsys.readouterr().err
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "notes.txt").write_text("mine")
    (tmp_path / "results").mkdir()
    assert main(["publish", "--results", str(tmp_path / "results"), "--out", str(taken)]) == 2
    assert "not a site" in capsys.readouterr().err
    assert (taken / "notes.txt").read_text() == "mine" and len(list(taken.iterdir())) == 1
    assert main(["publish", "--results", str(tmp_path / "results"), "--out",
                 str(tmp_path / "s"), "--files-url", "javascript:alert(1)"]) == 2
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    assert main(["publish", "--results", str(tmp_path / "results"), "--out",
                 str(blocker / "site")]) == 2
    assert "cannot write the site" in capsys.readouterr().err


def test_rebuild_replaces_its_own_site(history, tmp_path: Path) -> None:
    out = tmp_path / "site"
    build_site(history[0], out)
    (out / "runs" / "stale.html").write_text("old")
    build_site(history[0], out)
    assert not (out / "runs" / "stale.html").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_files_url_links_to_the_host(history, tmp_path: Path) -> None:
    out = tmp_path / "site"
    build_site(history[0], out, files_url="https://github.com/o/r/blob/nightly-results")
    page = next((out / "runs" / "suite_a").glob("*.html")).read_text()
    assert re.search(r'href="https://github.com/o/r/blob/nightly-results/runs/suite_a/'
                     r'[^"/]+/run.json"', page)


def test_slug_is_safe_and_distinct() -> None:
    assert slug("suite_a.t06") == "suite_a.t06"
    names = {slug(text) for text in ("a/b", "a_b", "a b", "../x", "<x>", "a" * 300)}
    assert len(names) == 6
    assert all(re.fullmatch(r"[A-Za-z0-9._-]+", name) and len(name) <= 69 for name in names)
    assert not any(name.startswith(".") for name in names)


def test_a_long_history_is_binned_and_stays_small(tmp_path: Path) -> None:
    root = tmp_path / "results"
    for day in range(260):
        night(root, day=day, accept=2.5 - 0.6 * (day in (100, 200, 201, 202)))
    out = tmp_path / "site"
    build_site(root, out, run_pages=5)
    page = (out / "suites" / "suite_a.html").read_text()
    pages = len(list((out / "runs" / "suite_a").glob("*.html")))
    assert pages < 12 and len(re.findall(r'<a xlink:href="', page)) == pages  # only those
    assert "260 runs, 95% CI" in page and "bins" in page
    assert "main: fail/error" in page  # failing nights still shown when binned
    assert len(page) < 120_000, len(page)


def test_label_keeps_only_those_lines(history, tmp_path: Path) -> None:
    out = tmp_path / "site"
    assert main(["publish", "--results", str(history[0]), "--out", str(out), "--label",
                 "release"]) == 0
    page = (out / "index.html").read_text()
    assert set(re.findall(r'data-line="([^"]+)"', page)) == {"release"}
    assert 'data-series="suite_a.t06"' not in page  # it has no release run
