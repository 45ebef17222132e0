"""The nightly publishes the site after its report, and deploys it whatever the verdict."""

from __future__ import annotations

import shlex
from pathlib import Path

from ruamel.yaml import YAML

from harness.cli import build_parser

NIGHTLY = Path(__file__).resolve().parents[2] / ".github" / "workflows" / "nightly.yml"


def test_report_publishes_then_pages_deploys() -> None:
    workflow = YAML(typ="safe").load(NIGHTLY.read_text())
    report = workflow["jobs"]["report"]["steps"]
    names = [step.get("name", step.get("uses", "")) for step in report]
    publish = names.index("Publish the history as a static site")
    assert names.index("Trend, plots and summary") < publish
    assert publish < names.index("Upload the site for GitHub Pages") < names.index("Verdict")
    assert "cancelled()" in report[publish]["if"]  # a failing night still publishes
    command = " ".join(report[publish]["run"].replace("\\\n", " ").split())
    argv = shlex.split(command.replace("${GITHUB_REPOSITORY}", "o/r")
                       .replace("${HISTORY_BRANCH}", "nightly-results"))
    assert argv[:2] == ["harness", "publish"]
    args = build_parser()[0].parse_args(argv[1:])
    assert str(args.results) == "history" and str(args.out) == "site"
    assert args.files_url == "https://github.com/o/r/blob/nightly-results"
    upload = report[names.index("Upload the site for GitHub Pages")]
    assert upload["uses"].startswith("actions/upload-pages-artifact@")
    assert upload["with"]["path"] == "site"
    pages = workflow["jobs"]["pages"]
    assert pages["needs"] == "report" and "cancelled()" in pages["if"]
    assert pages["permissions"] == {"pages": "write", "id-token": "write"}
    assert pages["steps"][0]["uses"].startswith("actions/deploy-pages@")
