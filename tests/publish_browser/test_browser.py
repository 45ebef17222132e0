"""The published site in a real browser: Debian's headless Chromium driven by Playwright,
loading the pages from file:// with every network request refused.

Run by `nox -s publish_browser` (which installs chromium and playwright); the `tests`
session leaves this folder out. The history is real: runs of the tiny suite on the
reference engine, on its first 40 questions (a release line; main with a degraded draft
paired against it; and a nightly line of three runs of `--build reference:policy=fixed`
then three of `reference:policy=fixed,noise=0.1`, one history across the two builds whose
step the site shows), plus nights written through the harness's writer for a second suite
(a drop the trend detector finds) and a crafted record whose label is markup. Screenshots
go to $HARNESS_PUBLISH_SHOTS (default: the test's temporary folder).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from harness.cli import main
from harness.results.readers import read_run
from harness.results.store import load_runs
from tests.publish.history import night, nightly_history

playwright = pytest.importorskip("playwright.sync_api", reason="nox -s publish_browser")

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = os.environ.get("HARNESS_CHROMIUM", "/usr/bin/chromium")
# as /work/.library/env/machines/python.md: no background traffic, a fresh profile
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--disable-quic"]
CRAFTED = '<script>document.title="pwned"</script><b>bold</b>'
REAL_SUITE = "tiny_dflash_cpu"
# Its first 40 questions (the shipped suite asks 100): nine runs make the history, and the
# site shows what a record holds whatever its size. The degraded draft's drop on them is
# still an alarm: the nights share their questions, and the trend compares them by
# question (the greedy engine answers each alike on every night of one build).
REAL_QUESTIONS = 40
# The nightly line's builds: the draft degraded from the fourth run on
BUILDS = ["reference:policy=fixed"] * 3 + ["reference:policy=fixed,noise=0.1"] * 3


def _harness(*args: str) -> None:
    env = {**os.environ, "HARNESS_REFERENCE_WORKERS": os.environ.get(
        "HARNESS_REFERENCE_WORKERS", "1")}
    done = subprocess.run([sys.executable, "-m", "harness", *args], env=env, timeout=1200,
                          capture_output=True, text=True, check=False)
    assert done.returncode in (0, 1), done.stderr[-3000:]  # 1: the degraded draft fails


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("history") / "results"
    given = os.environ.get("HARNESS_PUBLISH_REAL_RESULTS")  # a folder of such runs, reused
    if given:
        shutil.copytree(given, root)
    else:
        text = (REPO / "suites" / f"{REAL_SUITE}.toml").read_text()
        assert "\nquestions = 100\n" in text
        suite = root.parent / f"{REAL_SUITE}.toml"  # its own name: the same series
        suite.write_text(text.replace("\nquestions = 100\n",
                                      f"\nquestions = {REAL_QUESTIONS}\n"))
        common = ["--results", str(root), "--no-plot", "--no-progress"]
        _harness("run", str(suite), "--label", "release", "--build", "reference:noise=0",
                 *common)
        _harness("run", str(suite), "--label", "main", "--build", "reference:noise=0.1",
                 "--against", "reference:noise=0", "--against-label", "release", *common)
        for build in BUILDS:
            _harness("run", str(suite), "--label", "nightly", "--build", build, *common)
    nightly_history(root)
    for day in range(3):
        night(root, day=day, accept=2.4, series="crafted", label=CRAFTED, reasons=[CRAFTED])
    return root


@pytest.fixture(scope="module")
def site(results: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site") / "site"
    assert main(["publish", "--results", str(results), "--out", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = Path(os.environ.get("HARNESS_PUBLISH_SHOTS") or tmp_path_factory.mktemp("shots"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Any:
    requests: list[str] = []
    with playwright.sync_playwright() as driver:
        context = driver.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("profile")), executable_path=CHROMIUM,
            args=CHROMIUM_ARGS, headless=True, viewport={"width": 1280, "height": 900},
            java_script_enabled=True)  # the site's own policy must stop script, not us

        def only_files(route: Any) -> None:
            requests.append(route.request.url)
            if route.request.url.startswith("file://"):
                route.continue_()
            else:
                route.abort()

        context.route("**/*", only_files)
        page = context.pages[0] if context.pages else context.new_page()
        page.requests = requests  # type: ignore[attr-defined]
        yield page
        context.close()


def cells(row: Any) -> dict[str, str]:
    return {cell.get_attribute("data-field"): cell.inner_text().strip()
            for cell in row.locator("td[data-field]").all()}


def test_overview_shows_the_records_figures(browser: Any, site: Path, results: Path,
                                            shots: Path) -> None:  # fmt: skip
    browser.goto((site / "index.html").as_uri())
    browser.screenshot(path=shots / "overview.png", full_page=True)
    runs = load_runs(results)
    rows = browser.locator("#overview tr[data-series]")
    seen = set()
    for row in rows.all():
        series, line = row.get_attribute("data-series"), row.get_attribute("data-line")
        shown = cells(row)
        line_runs = runs[(runs["suite"] == series) & (runs["kind"] == "run")
                         & (runs["label"] == line)]  # fmt: skip
        latest = read_run(Path(line_runs["path"].iloc[-1]))
        m = latest.measurement
        assert shown["latest_run"] == latest.run_id
        assert float(shown["accept_length"]) == pytest.approx(m.accept_length, abs=5e-5)
        low, high = (float(v) for v in shown["ci"].split("–"))
        assert (low, high) == pytest.approx(m.accept_length_ci, abs=5e-4)
        assert float(shown["floor"]) == latest.suite.document["floors"]["accept_length"]
        assert shown["verdict"] == latest.verdict.status.upper()
        assert int(shown["runs"]) == len(line_runs)
        seen.add((series, line))
    assert {(REAL_SUITE, "main"), (REAL_SUITE, "release"), (REAL_SUITE, "nightly"),
            ("suite_a", "main"),
            ("suite_a", "release"), ("suite_a.t06", "main"), ("crafted", CRAFTED)} <= seen
    real_main = cells(browser.locator(f'#overview tr[data-series="{REAL_SUITE}"]'
                                      '[data-line="main"]'))  # fmt: skip
    assert "against reference:noise=0" in real_main["paired"]
    alarm = cells(browser.locator('#overview tr[data-series="suite_a"][data-line="main"]'))
    assert alarm["trend"].startswith("drop")


def test_a_drop_names_its_commits_and_the_bisect_line(browser: Any, site: Path,
                                                      results: Path, shots: Path) -> None:
    browser.goto((site / "index.html").as_uri())
    browser.locator('#overview a:text-is("suite_a")').click()
    browser.screenshot(path=shots / "suite-drop.png", full_page=True)
    drop = browser.locator("#steps tr.drop")
    assert drop.count() == 1
    command = drop.locator("code.command").inner_text()
    runs = load_runs(results, suite="suite_a")
    main_runs = runs[runs["label"] == "main"].reset_index(drop=True)
    shas = list(main_runs["build.git_sha"])
    first_bad = next(i for i, value in enumerate(main_runs["accept_length"]) if value < 2.3)
    assert command.startswith("harness bisect suite_a --good ")
    assert f"@{shas[first_bad - 1]}#" in command and f"@{shas[first_bad]}#" in command


def test_a_step_across_builds_shows_on_the_site(browser: Any, site: Path, results: Path,
                                                shots: Path) -> None:
    """The nightly line's history spans its two builds: the drop between them is a step
    with an open alarm, named by the runs and builds either side."""
    runs = load_runs(results, suite=REAL_SUITE)
    nightly = runs[(runs["kind"] == "run") & (runs["label"] == "nightly")]
    assert list(nightly["build.spec"]) == BUILDS
    assert nightly["suite_sha256"].nunique() == 1  # the build is not the suite's identity
    figures = list(nightly["accept_length"])
    assert max(figures[3:]) < min(figures[:3]) - 0.1  # the degraded draft: a clear drop

    browser.goto((site / "index.html").as_uri())
    shown = cells(browser.locator(f'#overview tr[data-series="{REAL_SUITE}"]'
                                  '[data-line="nightly"]'))  # fmt: skip
    assert int(shown["runs"]) == len(BUILDS)
    assert shown["trend"].startswith("drop ")
    assert float(shown["change"]) == pytest.approx(figures[-1] - figures[-2], abs=5e-4)
    browser.locator(f'#overview a:text-is("{REAL_SUITE}")').click()
    browser.screenshot(path=shots / "suite-build-step.png", full_page=True)
    step = browser.locator("#steps tr.drop", has_text="nightly")
    assert step.count() == 1
    texts = [cell.inner_text().strip() for cell in step.locator("td").all()]
    # the levels either side: weighted means of each build's runs (equal figures, seeded)
    before, after = (float(level) for level in texts[2].split("→"))
    assert before == pytest.approx(sum(figures[:3]) / 3, abs=0.01)
    assert after == pytest.approx(sum(figures[3:]) / 3, abs=0.01)
    assert float(texts[3]) == pytest.approx(after - before, abs=2e-3)
    assert texts[5] == "yes: alarm"
    assert f"{BUILDS[0]} .. " in texts[6] and texts[6].endswith(BUILDS[-1])


def test_crafted_label_shows_as_text(browser: Any, site: Path, shots: Path) -> None:
    browser.goto((site / "index.html").as_uri())
    assert browser.title() == "all suites · accept length"  # no script ran
    assert browser.locator("script").count() == 0 and browser.locator("b").count() == 0
    row = browser.locator('#overview tr[data-series="crafted"]')
    assert row.locator("td.line").inner_text() == CRAFTED
    row.locator("a").first.click()
    assert "crafted" in browser.title() and browser.locator("script").count() == 0
    assert browser.get_by_text(CRAFTED).count() >= 1
    browser.screenshot(path=shots / "crafted.png", full_page=True)


def test_a_point_leads_to_its_run_page(browser: Any, site: Path, results: Path,
                                       shots: Path) -> None:  # fmt: skip
    browser.goto((site / "index.html").as_uri())
    browser.locator(f'#overview a:text-is("{REAL_SUITE}")').click()
    assert browser.locator("#history svg").count() == 1
    browser.screenshot(path=shots / "suite.png", full_page=True)
    points = browser.locator("#history svg a")
    real = load_runs(results, suite=REAL_SUITE)
    assert points.count() == len(real[real["kind"] == "run"])  # each run has its page
    href = points.last.get_attribute("xlink:href") or points.last.get_attribute("href")
    points.last.click()
    browser.wait_for_load_state()
    assert browser.url.endswith(href.removeprefix(".."))
    run_id = browser.locator("#run-id").inner_text()
    folder = next((results / "runs" / REAL_SUITE).glob(f"*-{run_id}"))
    record = read_run(folder)
    facts = {row.locator("th").inner_text(): row.locator("td").inner_text()
             for row in browser.locator("table.facts tr").all()}
    assert float(facts["accept length"]) == pytest.approx(record.measurement.accept_length,
                                                          abs=5e-5)
    assert facts["commit"] in (record.build.git_sha, "–")
    assert facts["data sha256"] == record.provenance.data_sha256
    assert facts["spec"] == record.build.spec
    browser.screenshot(path=shots / "run.png", full_page=True)
    browser.locator('#files a:text-is("run.json")').click()  # a file of the run, from file://
    assert browser.url.endswith(f"{folder.name}/run.json")
    assert run_id in browser.content()


def test_nothing_but_files_was_requested(browser: Any) -> None:
    assert browser.requests and all(url.startswith("file://") for url in browser.requests)
    nav = browser.evaluate("() => 1")  # the page can be evaluated: the checks above were live
    assert nav == 1


def test_styles_load_under_the_policy(browser: Any, site: Path) -> None:
    browser.goto((site / "index.html").as_uri())
    colour = browser.evaluate("() => getComputedStyle(document.querySelector('nav'))"
                              ".backgroundColor")
    assert re.fullmatch(r"rgb\(242, 244, 247\)", colour)


def test_the_regressions_page_lists_each_open_drop(browser: Any, site: Path,
                                                   shots: Path) -> None:
    """Issue 51: from any page's header to the open regressions; each row names its
    series, night, build and size, and links to the suite's page; the feed is beside it."""
    browser.goto((site / "index.html").as_uri())
    browser.locator('nav a:text-is("open regressions")').click()
    browser.screenshot(path=shots / "regressions.png", full_page=True)
    rows = browser.locator("#regressions tr.drop")
    shown = {row.get_attribute("data-series"): cells(row) for row in rows.all()}
    assert "suite_a" in shown and REAL_SUITE in shown  # the writer's drop and the builds'
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2} .+", shown["suite_a"]["night"])
    assert "noise=0.1" in shown[REAL_SUITE]["build"]
    assert re.match(r"-\d\.\d{4} \(-\d+\.\d%\)", shown[REAL_SUITE]["size"])
    assert (site / "regressions.atom").is_file()
    browser.locator(f'#regressions a:text-is("{REAL_SUITE}")').first.click()
    assert browser.url.endswith(f"suites/{REAL_SUITE}.html")
