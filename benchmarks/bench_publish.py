"""`harness publish` at scale: 20 suites x 1,000 nights; goals: the site in a few MB
(<= 5 MB) and the overview loaded in a browser in under a second (issue 32).

Records are synthesised once (reused with --dir) in the real layout and indexed as the
writer does (bench_store's way): per suite, main and (with --lines 2) release lines, a
drop of 0.3 at night 700 on main, categories and positions in every record. Then the
site is built in a fresh interpreter (timed), its size is summed, and the overview and the
largest suite page are loaded in Debian's headless Chromium from file:// (Playwright;
navigation start to the load event, median of --repeat fresh pages). Without Playwright
or Chromium (`nox -s bench`), the load times are reported as not measured; `nox -s
publish_browser`'s environment has both:
    .nox/publish_browser/bin/python benchmarks/bench_publish.py
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from scratch import kept_or_scratch

SIZE_GOAL_MB = 5.0
LOAD_GOAL_S = 1.0
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def _template(suite: str) -> dict:
    from harness.results.record import (
        BuildInfo,
        CategoryResult,
        GPUInfo,
        Measurement,
        Provenance,
        RunRecord,
        SuiteInfo,
        Verdict,
    )

    document = {"name": suite, "engine": {"kind": "sglang"}, "topology": {"gpus": 2},
                "floors": {"accept_length": 5.4, "metric": "server_avg"},
                "baselines": [{"label": "post-fix", "accept_length": 5.62, "source": "PR"}]}
    categories = {name: CategoryResult(n_prompts=100, n_requests=100, accept_length=5.6,
                                       accept_length_ci=(5.5, 5.7)) for name in ("a", "b")}
    record = RunRecord(
        run_id="00000000", label="main", started_at=datetime(2024, 1, 1, tzinfo=UTC),
        suite=SuiteInfo(name=suite, sha256="0" * 64, document=document),
        build=BuildInfo(engine="sglang", spec="git+https://github.com/sgl-project/sglang@main"
                        "#subdirectory=python", version="0.5.24.dev", git_sha="0" * 40),
        provenance=Provenance(harness_version="0.1.0", python="3.11.9", platform="linux",
                              gpus=[GPUInfo(index=i, name="NVIDIA H200", memory_gib=141.0)
                                    for i in (0, 1)], data_sha256="d" * 64),
        measurement=Measurement(metric="server_avg", accept_length=5.6,
                                accept_length_ci=(5.5, 5.7), n_requests=200,
                                per_position_acceptance=[0.9, 0.8, 0.7],
                                per_position_ci=[(0.88, 0.92), (0.78, 0.82), (0.68, 0.72)],
                                categories=categories),
        verdict=Verdict(status="pass"))
    return record.model_dump(mode="json")


def synthesise(root: Path, suites: int, nights: int, lines: int, seed: int = 0) -> None:
    import numpy as np

    from harness.results.index import note_written
    from harness.results.layout import RUN_FILE, run_dir_name

    rng = np.random.default_rng(seed)
    start = datetime(2024, 1, 1, 2, 17, tzinfo=UTC)
    for s in range(suites):
        suite = f"suite_{s:02d}"
        base = _template(suite)
        folder = root / "runs" / suite
        folder.mkdir(parents=True, exist_ok=True)
        for night in range(nights):
            for line in ("main", "release")[:lines]:
                drop = 0.3 if line == "main" and night >= 700 else 0.0
                value = float(5.6 - drop + 0.05 * rng.standard_normal())
                started = start + timedelta(days=night, minutes=10 if line == "release" else 0)
                run_id = f"{s:02x}{night:05x}{line == 'release':d}"
                base.update(run_id=run_id, label=line,
                            started_at=started.isoformat().replace("+00:00", "Z"))
                base["build"]["git_sha"] = f"{night:040x}"
                m = base["measurement"]
                m["accept_length"] = value
                m["accept_length_ci"] = [value - 0.1, value + 0.1]
                base["verdict"]["status"] = "pass" if value >= 5.4 else "fail"
                run_dir = folder / run_dir_name(started, run_id)
                run_dir.mkdir()
                text = json.dumps(base)
                (run_dir / RUN_FILE).write_text(text)
                note_written(run_dir / RUN_FILE, text)


def load_times(pages: list[Path], repeat: int) -> list[float] | None:
    """Median seconds from navigation start to the load event, per page, in Chromium."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return None
    if not Path(CHROMIUM).exists():
        return None
    medians = []
    with sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        for page_file in pages:
            samples = []
            for _ in range(repeat):
                page = browser.new_page()
                page.goto(page_file.as_uri(), wait_until="load")
                samples.append(page.evaluate(
                    "() => performance.getEntriesByType('navigation')[0].loadEventEnd") / 1000)
                page.close()
            medians.append(statistics.median(samples))
        browser.close()
    return medians


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suites", type=int, default=20)
    parser.add_argument("--nights", type=int, default=1000)
    parser.add_argument("--lines", type=int, default=1, choices=(1, 2),
                        help="1: main only; 2: main and release each night")
    parser.add_argument("--dir", type=Path, help="keep the synthesised records here (reused)")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    here = Path(__file__).resolve().parents[1]
    with kept_or_scratch(args.dir, "bench-publish-") as root:
        results, site = root / "results", root / "site"
        if not (results / "runs").is_dir():
            began = time.perf_counter()
            synthesise(results, args.suites, args.nights, args.lines)
            print(f"synthesised {args.suites} suites x {args.nights} nights x {args.lines} "
                  f"line(s) in {time.perf_counter() - began:.1f} s")
        began = time.perf_counter()
        subprocess.run([sys.executable, "-m", "harness", "publish", "--results", str(results),
                        "--out", str(site)], cwd=here, check=True,
                       env=dict(os.environ, PYTHONPATH=str(here)))  # fmt: skip
        build_s = time.perf_counter() - began
        files = [f for f in site.rglob("*") if f.is_file()]
        total = sum(f.stat().st_size for f in files) / 1e6
        overview = (site / "index.html").stat().st_size / 1e3
        largest = max(site.glob("suites/*.html"), key=lambda f: f.stat().st_size)
        print(f"build {build_s:.1f} s wall (fresh interpreter, {len(files)} files)")
        print(f"site {total:.2f} MB ({total / SIZE_GOAL_MB:.2f} x the {SIZE_GOAL_MB:g} MB goal); "
              f"overview {overview:.1f} kB; largest suite page {largest.stat().st_size / 1e3:.0f}"
              f" kB")  # fmt: skip
        times = load_times([site / "index.html", largest], args.repeat)
        if times is None:
            print("load in a browser: not measured (no playwright or /usr/bin/chromium here)")
        else:
            print(f"overview load {times[0]:.3f} s ({times[0] / LOAD_GOAL_S:.2f} x the "
                  f"{LOAD_GOAL_S:g} s goal); largest suite page {times[1]:.3f} s "
                  f"(Chromium from file://, median of {args.repeat})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
