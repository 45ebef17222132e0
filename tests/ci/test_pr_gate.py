"""The PR gate workflow and the nightly's paired gate: schema-valid, wired, and their
shell steps dry-run here on a local git history standing in for an SGLang fork."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from ruamel.yaml import YAML

from tests.ci.test_workflows import ROOT, WORKFLOWS, check_jsonschema

CALLER = ROOT / "ci" / "sglang-pr-gate-caller.yml"


def load(path: Path) -> dict:
    return YAML(typ="safe").load(path.read_text())


def test_pr_gate_and_its_caller_pass_the_schema() -> None:
    result = check_jsonschema(WORKFLOWS / "pr-gate.yml", CALLER)
    assert result.returncode == 0, result.stdout + result.stderr


def test_pr_gate_runs_the_audit_first_then_head_against_the_merge_base_on_gpu() -> None:
    workflow = load(WORKFLOWS / "pr-gate.yml")
    triggers = workflow["on"]
    assert {"workflow_dispatch", "workflow_call", "pull_request"} <= set(triggers)
    assert triggers["pull_request"]["types"] == ["labeled"]
    assert {"repo", "head", "base"} <= set(triggers["workflow_call"]["inputs"])
    jobs = workflow["jobs"]
    assert "spec-gate" in jobs["plan"]["if"]
    assert jobs["audit"]["runs-on"] == "ubuntu-latest" and jobs["audit"]["needs"] == "plan"
    gate = jobs["gate"]
    assert gate["needs"] == ["plan", "audit"] and gate["runs-on"] == "${{ matrix.runs_on }}"
    steps = "\n".join(step.get("run", "") for step in gate["steps"])
    assert '--sglang "$HEAD_SPEC"' in steps and '--against "$BASE_SPEC"' in steps
    assert "--require-fit" in steps and "harness paired" in steps
    caller = load(CALLER)["jobs"]["spec-gate"]
    assert caller["uses"].endswith("/.github/workflows/pr-gate.yml@main")
    assert caller["with"]["head"] == "${{ github.event.pull_request.head.sha }}"


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True, env={**os.environ, "GIT_AUTHOR_NAME": "t",
                                          "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                                          "GIT_COMMITTER_EMAIL": "t@t"}).stdout.strip()


def harness_on_path(tmp_path: Path) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "harness"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m harness "$@"\n')
    shim.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}",
            "PYTHONPATH": str(ROOT)}


def test_plan_script_resolves_head_and_merge_base_of_a_fork_and_the_gate_dry_runs(
        tmp_path: Path) -> None:
    upstream = tmp_path / "sglang"
    upstream.mkdir()
    git(upstream, "init", "-q", "-b", "main")
    for name in ("one", "two"):
        (upstream / name).write_text(name)
        git(upstream, "add", name)
        git(upstream, "commit", "-q", "-m", name)
    fork_point = git(upstream, "rev-parse", "HEAD")
    git(upstream, "checkout", "-q", "-b", "feature")
    (upstream / "change").write_text("pr")
    git(upstream, "add", "change")
    git(upstream, "commit", "-q", "-m", "the PR")
    head = git(upstream, "rev-parse", "HEAD")
    git(upstream, "checkout", "-q", "main")
    (upstream / "later").write_text("main moved on")
    git(upstream, "add", "later")
    git(upstream, "commit", "-q", "-m", "later")
    output = tmp_path / "github_output"
    env = {**harness_on_path(tmp_path), "REPO": f"file://{upstream}", "HEAD_REF": "feature",
           "BASE_REPO": f"file://{upstream}", "BASE_REF": "main", "SUITES": "qwen3_8b_dflash",
           "GITHUB_OUTPUT": str(output)}
    plan = subprocess.run(["bash", str(ROOT / "ci" / "pr-gate-plan.sh")], env=env,
                          capture_output=True, text=True, timeout=300)
    assert plan.returncode == 0, plan.stdout + plan.stderr
    outputs = dict(line.split("=", 1) for line in output.read_text().splitlines())
    assert outputs["head_spec"] == f"git+file://{upstream}@{head}#subdirectory=python"
    assert outputs["base_spec"] == f"git+file://{upstream}@{fork_point}#subdirectory=python"
    matrix = json.loads(outputs["matrix"])["include"]
    assert [(e["suite"], e["build"]) for e in matrix] == [("qwen3_8b_dflash",
                                                          outputs["head_spec"])]
    # the gate job's preflight step, as the workflow writes it, on this plan's outputs
    workflow = load(WORKFLOWS / "pr-gate.yml")
    preflight = next(s["run"] for s in workflow["jobs"]["gate"]["steps"]
                     if s.get("name") == "Preflight")
    command = preflight.replace(".venv-gate/bin/harness", "harness")
    dry = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=300,
                         env={**env, "SUITE_FILE": str(ROOT / matrix[0]["file"]),
                              "HEAD_SPEC": outputs["head_spec"],
                              "BASE_SPEC": outputs["base_spec"]})
    assert dry.returncode == 0, dry.stdout + dry.stderr
    assert f"paired against: {outputs['base_spec']}" in dry.stdout
    assert re.search(r"@" + head, dry.stdout)


def test_nightly_report_puts_the_paired_gate_beside_the_floors_and_fails_on_it() -> None:
    workflow = load(WORKFLOWS / "nightly.yml")
    report = "\n".join(step.get("run", "") for step in workflow["jobs"]["report"]["steps"])
    assert 'harness paired $suites --results history --label "$label" --since "$SINCE"' in report
    assert '"$status" -eq 1' in report  # a failed paired gate fails the night
