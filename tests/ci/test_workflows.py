"""The GitHub workflows: schema-valid (offline), and wired to the commands that exist."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from harness.commands import COMMANDS

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = ROOT / ".github" / "workflows"


def check_jsonschema(*files: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "check_jsonschema",
               "--builtin-schema", "vendor.github-workflows", *map(str, files)]  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


def load(name: str) -> dict:
    return YAML(typ="safe").load((WORKFLOWS / name).read_text())


def test_workflows_pass_the_schema() -> None:
    files = sorted(WORKFLOWS.glob("*.yml"))
    assert {f.name for f in files} >= {"ci.yml", "nightly.yml"}
    result = check_jsonschema(*files)
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_broken_workflow_fails_the_schema(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yml"
    text = (WORKFLOWS / "nightly.yml").read_text().replace("runs-on: ubuntu-latest", "runs_on: x")
    broken.write_text(text)
    assert check_jsonschema(broken).returncode != 0


def test_ci_runs_dot_ci_run_on_pull_requests() -> None:
    workflow = load("ci.yml")
    assert "pull_request" in workflow["on"]
    steps = [step.get("run", "") for job in workflow["jobs"].values() for step in job["steps"]]
    assert "bash .ci/run" in steps


def test_nightly_shape() -> None:
    workflow = load("nightly.yml")
    triggers = workflow["on"]
    assert triggers["schedule"][0]["cron"]
    assert {"sglang", "suites"} <= set(triggers["workflow_dispatch"]["inputs"])
    jobs = workflow["jobs"]
    suite = jobs["suite"]
    assert suite["needs"] == "matrix"
    assert suite["strategy"]["matrix"] == "${{ fromJSON(needs.matrix.outputs.matrix) }}"
    assert suite["strategy"]["fail-fast"] is False
    assert suite["runs-on"] == "${{ matrix.runs_on }}"
    uses = [step.get("uses", "") for step in suite["steps"]]
    assert any(u.startswith("actions/upload-artifact@") for u in uses)
    report = jobs["report"]
    assert set(report["needs"]) == {"matrix", "suite"} and report["if"] == "always()"
    report_runs = "\n".join(step.get("run", "") for step in report["steps"])
    assert "GITHUB_STEP_SUMMARY" in report_runs and "--markdown" in report_runs
    assert any(step.get("uses", "").startswith("actions/download-artifact@")
               for step in report["steps"])  # fmt: skip


def _run_scripts(workflow: dict) -> str:
    return "\n".join(step.get("run", "") for job in workflow["jobs"].values()
                     for step in job.get("steps", []))  # fmt: skip


@pytest.mark.parametrize("name", ["nightly.yml", "ci.yml", "pr-gate.yml"])
def test_commands_the_workflows_call_exist(name: str) -> None:
    scripts = _run_scripts(load(name))
    for subcommand in re.findall(r"harness (\w+)", scripts):
        assert subcommand in COMMANDS, subcommand
    from harness.ci.pytest_plugin import pytest_addoption

    options: list[str] = []

    class Group:
        def addoption(self, *names: str, **_: object) -> None:
            options.extend(names)

    class Parser:
        def getgroup(self, *_: object) -> Group:
            return Group()

    pytest_addoption(Parser())  # type: ignore[arg-type]
    # each pytest command with its continuation lines joined
    commands = re.findall(r"[^\n]*pytest(?:[^\n]*\\\n)*[^\n]*", scripts)
    assert commands or name == "ci.yml"
    for command in commands:
        for option in re.findall(r"(?<![\w-])(--[a-z][a-z-]+)", command):
            assert option in options or option in {"--junitxml"}, option


def test_nightly_tests_sglang_main_and_the_release_as_two_labelled_lines() -> None:
    workflow = load("nightly.yml")
    plan = "\n".join(step.get("run", "") for step in workflow["jobs"]["matrix"]["steps"])
    # main is resolved to the commit tested tonight, and that commit is the build spec
    assert "git ls-remote" in plan and "refs/heads/main" in plan
    assert '--build "main=git+$SGLANG_REPO@$main_sha#subdirectory=python"' in plan
    # the release is measured in main's own job, on the same runner, as its paired reference
    assert '--build "release=$RELEASE_SPEC"' not in plan and 'labels="main release"' in plan
    suite = "\n".join(step.get("run", "") for step in workflow["jobs"]["suite"]["steps"])
    assert "--require-fit" in suite and '--label "$BUILD_LABEL"' in suite
    assert '--against "$RELEASE_SPEC" --against-label release' in suite


def test_nightly_report_judges_tonight_only_and_keeps_tokens_out_of_urls() -> None:
    workflow = load("nightly.yml")
    report = "\n".join(step.get("run", "") for step in workflow["jobs"]["report"]["steps"])
    assert '--since "$SINCE"' in report and '--label "$label"' in report
    text = (WORKFLOWS / "nightly.yml").read_text()
    assert "x-access-token" not in text and "@github.com" not in text
    assert "gh auth setup-git" in report
