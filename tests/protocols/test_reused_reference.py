"""`harness run --against A`: a stored run of A that would be reused is read through the
door, its request rows included, before B is measured: a damaged requests.jsonl is named
(file and line, exit 2) at once, not after a whole B run that then cannot be paired."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.errors import BadInput
from harness.protocols import pairing
from harness.results.layout import REQUESTS_FILE, RUN_FILE
from harness.results.record import RunRecord
from harness.run.runner import RunOptions
from harness.suite.model import load_suite
from tests.results.records import make_run

SUITE = "tiny_dflash_cpu"


def wanted_of(data: dict) -> dict:
    """The identity a run made now would have to reuse the stored record `data`."""
    return pairing.identity_of(RunRecord.model_validate(data))


def stored_reference(results: Path) -> tuple[Path, dict]:
    """A complete run of A that `reusable` takes: planned = asked, prompts hashed."""
    folder = make_run(results, 2.5, n=12, suite=SUITE, label="against")
    data = json.loads((folder / RUN_FILE).read_text())
    data["measurement"]["n_planned"] = data["measurement"]["n_requests"]
    data["workload"] = {"kind": "gsm8k", "prompts_sha256": "p" * 64}
    (folder / RUN_FILE).write_text(json.dumps(data))
    return folder, wanted_of(data)


def pair(results: Path, wanted: dict, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Run B against the stored A; returns what was measured (nothing, here)."""
    import harness.run.runner as runner

    measured: list[str] = []
    monkeypatch.setattr(pairing, "expected_identities", lambda loaded, options: {SUITE: wanted})
    monkeypatch.setattr(runner, "run_suite",
                        lambda loaded, options: measured.append("B" if options.pairing else "A"))
    loaded = load_suite(SUITE)
    options = RunOptions(results_dir=results, plot=False, progress=False)
    pairing.run_paired(loaded, options, "reference")
    return measured


def test_a_reused_reference_with_a_damaged_row_stops_before_b(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder, wanted = stored_reference(tmp_path)
    file = folder / REQUESTS_FILE
    lines = file.read_text().splitlines()
    lines[1] = lines[1].replace('"verify_steps": ', '"verify_steps": -')
    file.write_text("\n".join(lines) + "\n")
    measured: list[str] = []
    with pytest.raises(BadInput, match=rf"{file} line 2: verify_steps") as raised:
        measured = pair(tmp_path, wanted, monkeypatch)
    assert measured == [] and raised.value.exit_code == 2


def test_a_reused_reference_with_rows_missing_stops_before_b(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder, wanted = stored_reference(tmp_path)
    file = folder / REQUESTS_FILE
    file.write_text("".join(file.read_text().splitlines(keepends=True)[:-3]))
    with pytest.raises(BadInput, match=rf"{file}: 9 request rows, its {RUN_FILE} counts 12"):
        pair(tmp_path, wanted, monkeypatch)


def test_a_sound_reference_is_reused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _, wanted = stored_reference(tmp_path)
    assert pair(tmp_path, wanted, monkeypatch) == ["B"]  # A reused, not measured
