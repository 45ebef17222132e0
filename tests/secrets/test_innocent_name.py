"""Issue 37: a token under an innocent name (`MY_SETTING = "sk-live-..."`, 19 characters after
the prefix, in a suite's engine.env) reached `harness show`, the `--dry-run` text, run.json
and the published site. Each output, with the value planted where a suite or a record can
carry it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import tomli_w

from harness.cli import main
from harness.publish.site import build_site
from harness.results.record import RunRecord
from harness.results.writer import save_run
from harness.run import provenance, recorded
from harness.suite.model import load_suite
from tests.results.records import make_run

VALUE = "sk-live-4f9aQz81Lm02Pn"  # 19 characters after `sk-`
TINY = load_suite("tiny_dflash_cpu")


def _suite(tmp_path: Path) -> Path:
    document: dict[str, Any] = json.loads(json.dumps(TINY.document))
    document.setdefault("engine", {})["env"] = {"MY_SETTING": VALUE}
    path = tmp_path / "innocent.toml"
    path.write_text(tomli_w.dumps(document))
    return path


@pytest.mark.parametrize("extra", [[], ["--json"]])
def test_show(tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str]) -> None:
    assert main(["show", str(_suite(tmp_path)), *extra]) == 0
    out = capsys.readouterr().out
    assert VALUE not in out and "MY_SETTING" in out


def test_dry_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", str(_suite(tmp_path)), "--dry-run", "--results",
                 str(tmp_path / "results")]) == 0
    captured = capsys.readouterr()
    assert VALUE not in captured.out + captured.err
    assert "MY_SETTING=" in captured.out  # the launch line still sets it


def test_what_a_run_records(tmp_path: Path) -> None:
    """The suite document and the server's environment as the run puts them in run.json."""
    loaded = load_suite(_suite(tmp_path))
    assert VALUE not in json.dumps(recorded.redacted_document(loaded))
    env = provenance.safe_env({"MY_SETTING": VALUE}, ["MY_SETTING"])
    assert VALUE not in json.dumps(env) and "MY_SETTING" in env


def test_run_json_through_the_writer(tmp_path: Path) -> None:
    """Whatever a record holds, the writer writes no token: run.json, request rows, index."""
    root = tmp_path / "results"
    run_dir = make_run(root)
    data = json.loads((run_dir / "run.json").read_text())
    data["run_id"] = "second"
    data["label"] = f"night {VALUE}"
    data["suite"]["document"].setdefault("engine", {})["env"] = {"MY_SETTING": VALUE}
    data["provenance"]["env"] = {"MY_SETTING": VALUE}
    data["provenance"]["argv"] = ["harness", "run", "s", "--label", VALUE]
    save_run(root, RunRecord.model_validate(data))
    files = [file for file in root.rglob("*") if file.is_file()]
    assert len(files) >= 3
    for file in files:
        assert VALUE not in file.read_text(), file


def test_the_site(tmp_path: Path) -> None:
    """A record written before this rule (the value in it as written) is published without
    it: the run page's environment, launch line, argv and suite text."""
    root = tmp_path / "results"
    for day in range(2):
        run_dir = make_run(root, seed=day)
        data = json.loads((run_dir / "run.json").read_text())
        data["suite"]["document"].setdefault("engine", {})["env"] = {"MY_SETTING": VALUE}
        data["provenance"]["env"] = {"MY_SETTING": VALUE, "HARNESS_NOTE": f"see {VALUE}"}
        data["provenance"]["argv"] = ["harness", "run", "s", "--label", VALUE]
        data["launch"] = {"command": ["python", "-m", "x", "--note", VALUE], "host": "127.0.0.1",
                          "port": 1}
        data["label"] = f"night {VALUE}"
        (run_dir / "run.json").write_text(json.dumps(data))
    out = tmp_path / "site"
    build_site(root, out)
    pages = [page for page in out.rglob("*") if page.is_file()]
    assert any(page.suffix == ".html" for page in pages)
    for page in pages:
        assert VALUE not in page.read_text(errors="replace"), page
