"""The pytest plugin with a fake runner: collection, markers, GPU leases, verdict mapping."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

# Stands in for harness.run.runner until the real one can run here: same API, records what it got.
FAKE_RUNNER = """
from __future__ import annotations
import json, os, time
from dataclasses import dataclass, field
from pathlib import Path

@dataclass
class RunOptions:
    results_dir: Path
    gpu_devices: list = field(default_factory=list)
    sglang: str | None = None
    label: str | None = None

@dataclass
class Outcome:
    status: str
    exit_code: int
    reasons: list
    run_dir: Path | None

def run_suite(loaded, options):
    name = loaded.suite.name
    start = time.time()
    time.sleep(float(os.environ.get("FAKE_RUN_S", "0")))
    with open(os.environ["FAKE_RUNNER_LOG"], "a") as log:
        log.write(json.dumps({"suite": name, "devices": options.gpu_devices, "pid": os.getpid(),
                              "start": start, "end": time.time(), "sglang": options.sglang,
                              "label": options.label,
                              "results_dir": str(options.results_dir)}) + "\\n")
    if "crash" in name:
        raise RuntimeError("runner blew up")
    verdicts = {"fail": ("fail", 1, ["accept length 1.41 [1.35, 1.47] below floor 1.5"]),
                "error": ("error", 3, ["server exited during launch"]),
                "skip": ("skipped", 4, ["needs 2 x H100, found 0"])}
    status, code, reasons = next(
        (v for key, v in verdicts.items() if key in name), ("pass", 0, []))
    return Outcome(status, code, reasons, Path(options.results_dir) / name)
"""

# every suite of the project, run by the fake runner the project writes
ON_FAKE_RUNNER = ("--suites", "suites", "--harness-runner", "fake_runner")


def suite_toml(name: str, gpus: int = 1, engine: str = "reference", nightly: bool = False) -> str:
    models = ""
    if engine == "sglang":
        models = '[target]\nmodel = "org/target"\n[draft]\nmodel = "org/draft"\n'
    return (
        textwrap.dedent(f"""\
        name = "{name}"
        nightly = {str(nightly).lower()}
        [engine]
        kind = "{engine}"
        [topology]
        gpus = {gpus}
        tp_size = {max(gpus, 1)}
        [floors]
        accept_length = 1.5
        """)
        + models
    )


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    pytester.makepyfile(fake_runner=FAKE_RUNNER)
    suites = pytester.mkdir("suites")
    for name, gpus, engine, nightly in [
        ("ref_pass", 1, "reference", True),
        ("ref_fail", 1, "reference", False),
        ("ref_error", 1, "reference", False),
        ("ref_skip", 0, "reference", False),
        ("big_sglang", 2, "sglang", True),
        ("huge", 8, "reference", False),
    ]:
        (suites / f"{name}.toml").write_text(suite_toml(name, gpus, engine, nightly))
    pytester.makepyfile(test_ordinary="def test_ordinary():\n    pass\n")
    monkeypatch.setenv("FAKE_RUNNER_LOG", str(pytester.path / "runs.jsonl"))
    monkeypatch.setenv("HARNESS_GPU_INVENTORY", "4xH100:80")
    monkeypatch.setenv("PYTHONPATH", str(pytester.path))
    monkeypatch.delenv("HARNESS_GPU_LOCK_DIR", raising=False)
    monkeypatch.syspath_prepend(pytester.path)
    return pytester


def runner_log(pytester: pytest.Pytester) -> list[dict]:
    path = pytester.path / "runs.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_inert_without_suites_option(project: pytest.Pytester) -> None:
    result = project.runpytest("--collect-only", "-q")
    result.stdout.fnmatch_lines(["test_ordinary.py::test_ordinary"])
    assert "suites/" not in result.stdout.str()


def test_collects_each_suite_with_markers(project: pytest.Pytester) -> None:
    items, _ = project.inline_genitems(*ON_FAKE_RUNNER)
    by_name = {item.name: item for item in items}
    assert sorted(by_name) == sorted(
        ["ref_pass", "ref_fail", "ref_error", "ref_skip", "big_sglang", "huge"]
    )
    big = by_name["big_sglang"]
    assert big.get_closest_marker("gpus").args == (2,)
    assert big.get_closest_marker("tp").kwargs == {"n": 2}
    assert big.get_closest_marker("engine_sglang") is not None
    assert big.get_closest_marker("nightly") is not None
    assert by_name["ref_fail"].get_closest_marker("engine_reference") is not None
    assert by_name["ref_fail"].get_closest_marker("nightly") is None
    # `--suites` alone replaces the default test paths: ordinary tests are not collected
    assert all(item.nodeid.startswith("suites/") for item in items)


def test_marker_selection(project: pytest.Pytester) -> None:
    result = project.runpytest(
        *ON_FAKE_RUNNER,
        "-m",
        "engine_reference and gpus(n=1)",
        "--collect-only",
        "-q",
    )
    out = result.stdout.str()
    assert "ref_pass" in out and "ref_fail" in out
    assert "big_sglang" not in out and "ref_skip" not in out and "huge" not in out


def test_bad_suite_is_a_collection_error(project: pytest.Pytester) -> None:
    (project.path / "suites" / "broken.toml").write_text('name = "broken"\n[engine]\nkind = "x"\n')
    result = project.runpytest("--suites", "suites", "--collect-only")
    result.stdout.fnmatch_lines(["*broken.toml*", "*engine: got 'x'*"])
    assert result.ret != 0


def test_verdicts_map_to_outcomes(project: pytest.Pytester) -> None:
    junit = project.path / "junit.xml"
    result = project.runpytest(
        *ON_FAKE_RUNNER,
        "--sglang",
        "sglang==0.5.23",
        f"--junitxml={junit}",
        "-rsf",
    )
    result.assert_outcomes(passed=2, failed=2, skipped=2)  # big_sglang runs: 2 of 4 GPUs
    out = result.stdout.str()
    assert "verdict fail (exit 1)" in out and "below floor 1.5" in out
    assert "verdict error (exit 3)" in out and "server exited during launch" in out
    assert "needs 2 x H100, found 0" in out  # the runner's own skip reason
    assert "needs 8 x GPU, found 4" in out  # more than the inventory: skipped, never run
    assert "Traceback" not in out
    runs = {row["suite"]: row for row in runner_log(project)}
    assert "huge" not in runs
    assert runs["big_sglang"]["devices"] == [0, 1]
    assert runs["ref_skip"]["devices"] == []
    assert {row["sglang"] for row in runs.values()} == {"sglang==0.5.23"}
    cases = {case.get("name"): case for case in ET.parse(junit).iter("testcase")}
    assert cases["ref_fail"].find("failure") is not None
    assert cases["huge"].find("skipped") is not None
    props = {p.get("name"): p.get("value") for p in cases["big_sglang"].iter("property")}
    assert props["gpu_devices"] == "0,1" and props["verdict"] == "pass"


def test_require_fit_fails_a_suite_this_host_cannot_run(project: pytest.Pytester) -> None:
    """A nightly job on a runner chosen to fit its suite: not fitting is a failure."""
    result = project.runpytest("--suites", "suites/huge.toml", "--suites", "suites/ref_skip.toml",
                               "--suites", "suites/ref_pass.toml",
                               "--harness-runner", "fake_runner",
                               "--require-fit", "--label", "main", "-rsf")
    result.assert_outcomes(passed=1, failed=2)
    out = result.stdout.str()
    assert "this runner cannot run the suite: needs 8 x GPU, found 4" in out
    assert "needs 2 x H100, found 0 (--require-fit)" in out
    assert {row["label"] for row in runner_log(project)} == {"main"}


def test_lease_released_when_the_runner_crashes(project: pytest.Pytester, tmp_path: Path) -> None:
    (project.path / "suites" / "ref_crash.toml").write_text(suite_toml("ref_crash", 4))
    lock_dir = tmp_path / "locks"
    result = project.runpytest(
        *ON_FAKE_RUNNER,
        "--gpu-lock-dir",
        str(lock_dir),
        "-k",
        "crash or big_sglang",
        "-p",
        "no:randomly",
    )
    result.assert_outcomes(passed=1, failed=1)
    from harness.ci.gpu_allocator import GPUAllocator, read_lease_log

    assert GPUAllocator(lock_dir, []).held() == {}
    events = [e["event"] for e in read_lease_log(lock_dir)]
    assert events.count("acquired") == events.count("released") == 2


def test_busy_gpus_skip_after_the_wait(project: pytest.Pytester, tmp_path: Path) -> None:
    from harness.ci.gpu_allocator import GPUAllocator
    from harness.results.record import GPUInfo
    from harness.suite.serving import Topology

    lock_dir = tmp_path / "locks"
    inventory = [GPUInfo(index=i, name="H100", memory_gib=80) for i in range(4)]
    # another process (here: this one) holds 3 of the 4 GPUs for the whole run
    GPUAllocator(lock_dir, inventory).acquire(Topology(gpus=3), owner="other job")
    result = project.runpytest(
        *ON_FAKE_RUNNER,
        "--gpu-lock-dir",
        str(lock_dir),
        "--gpu-wait",
        "0.2",
        "-k",
        "big_sglang or ref_pass",
        "-rs",
    )
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(["*waited 0.2 s for 2 GPU(s)*"])
    assert [row["devices"] for row in runner_log(project)] == [[3]]


def test_xdist_workers_hold_disjoint_gpus(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    suites = project.path / "suites"
    for path in suites.glob("*.toml"):
        path.unlink()
    for index in range(6):
        (suites / f"ref_{index}.toml").write_text(suite_toml(f"ref_{index}", 1))
    (suites / "ref_two.toml").write_text(suite_toml("ref_two", 2))
    monkeypatch.setenv("FAKE_RUN_S", "0.4")
    result = project.runpytest_subprocess(
        "--suites", "suites", "--harness-runner", "fake_runner", "-n", "3", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(passed=7)
    runs = runner_log(project)
    assert len({row["pid"] for row in runs}) == 3
    overlaps = 0
    for i, a in enumerate(runs):
        for b in runs[i + 1 :]:
            if a["start"] < b["end"] and b["start"] < a["end"]:
                overlaps += 1
                assert not set(a["devices"]) & set(b["devices"]), (a, b)
    assert overlaps > 0


def test_plugin_import_is_light() -> None:
    code = (
        "import sys, harness.ci.pytest_plugin; "
        "print(sorted(m for m in ('pydantic', 'pandas', 'numpy', 'matplotlib', 'httpx') "
        "if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


SECRET_SUITE = suite_toml("secretive", gpus=0).replace(
    'kind = "reference"', 'kind = "reference"\nextra_args = ["--api-key", "sk-PLANTED-junit-2"]'
) + '[engine.env]\nWANDB_API_KEY = "wb-PLANTED-junit-1"\n'


def test_junit_and_terminal_carry_no_secret(pytester: pytest.Pytester,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 20, case 1: a suite failing inside the real runner (a build spec with URL
    credentials, for the wrong engine) reports in JUnit and on the terminal without the
    suite's secrets or the spec's token (no traceback with the frames' arguments)."""
    suites = pytester.mkdir("suites")
    (suites / "secretive.toml").write_text(SECRET_SUITE)
    monkeypatch.delenv("HARNESS_GPU_LOCK_DIR", raising=False)
    junit = pytester.path / "junit.xml"
    spec = "git+https://oauth2:ghp_PLANTEDjunit3@github.com/x/sglang@main"
    result = pytester.runpytest("--suites", "suites", "--sglang", spec,
                                f"--junitxml={junit}", "--results-dir", "results")
    result.assert_outcomes(failed=1)
    out = result.stdout.str() + junit.read_text()
    assert "is an SGLang build" in out
    for planted in ("wb-PLANTED-junit-1", "sk-PLANTED-junit-2", "ghp_PLANTEDjunit3"):
        assert planted not in out
