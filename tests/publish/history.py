"""Recorded histories for the publish tests, written through the harness's own writer
(`harness.results.writer.save_run`), so the loader reads them as it reads a night's runs."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from harness.results import record as rec
from harness.results.writer import save_run

START = datetime(2026, 3, 1, 2, 17, tzinfo=UTC)
SGLANG = "git+https://github.com/sgl-project/sglang@main#subdirectory=python"
RELEASE = "sglang==0.5.23"


def document(series: str, floor: float = 2.0, baselines: list[dict[str, Any]] | None = None
             ) -> dict[str, Any]:  # fmt: skip
    base, _, _entry = series.partition(".")
    return {"name": base, "engine": {"kind": "sglang"}, "topology": {"gpus": 1},
            "speculative": {"algorithm": "DFLASH", "block_size": 8},
            "floors": {"accept_length": floor, "metric": "per_request",
                       "categories": {"math": {"accept_length": 2.2}},
                       "positions": [0.5, 0.3]},
            "baselines": baselines if baselines is not None else [
                {"label": "post-fix", "accept_length": 2.62, "source": "a PR", "external": True}]}


def night(root: Path, *, day: int, accept: float, series: str = "suite_a", label: str = "main",
          sha: str | None = None, spec: str | None = SGLANG, floor: float = 2.0,
          reasons: list[str] | None = None, paired_with: str | None = None,
          baselines: list[dict[str, Any]] | None = None) -> Path:
    """One night's run of `series` on line `label`: figures consistent with their counts
    (1000 verify steps), two categories, two draft positions, two GPUs."""
    steps = 1000
    tokens = round(accept * steps)
    value = tokens / steps
    half = 0.08
    categories = {
        "math": rec.CategoryResult(n_prompts=60, n_requests=60, accept_length=value + 0.1,
                                   accept_length_ci=(value + 0.1 - half, value + 0.1 + half)),
        "code": rec.CategoryResult(n_prompts=40, n_requests=40, accept_length=value - 0.15,
                                   accept_length_ci=(value - 0.15 - half, value - 0.15 + half)),
    }
    paired = None
    if paired_with is not None:
        paired = {"against": {"run_id": paired_with, "path": "x", "spec": RELEASE,
                              "reused": False},
                  "status": "pass", "floors_status": "pass",
                  "result": {"decision": "not_worse", "n": 100, "a": value + 0.01, "b": value,
                             "difference": -0.01, "difference_ci": [-0.04, 0.02], "level": 0.9,
                             "relative_change": -0.01 / (value + 0.01), "tolerated_drop": 0.05,
                             "tolerance": "relative_drop 0.02"}}
    series_document = document(series, floor, baselines)
    record = rec.RunRecord(
        run_id=rec.new_run_id(), label=label,
        started_at=START + timedelta(days=day, minutes=7 if label == "release" else 0),
        suite=rec.SuiteInfo(name=series, sha256="a" * 64, document=series_document,
                            entry=series.partition(".")[2] or None),
        build=rec.BuildInfo(engine="sglang", spec=spec, version="0.5.24.dev",
                            git_sha=sha or f"{day:02d}" + "c0ffee" * 6 + "00"),
        provenance=rec.Provenance(
            harness_version="0.1.0", harness_git_sha="feedface" * 5, python="3.11",
            platform="linux", driver="570.86", cuda="12.8", data_source="local file",
            data_sha256="d" * 64, seed=0,
            gpus=[rec.GPUInfo(index=i, name="NVIDIA H200", memory_gib=141.0) for i in (0, 1)]),
        measurement=rec.Measurement(
            metric="per_request", accept_length=value, accept_length_per_request=value,
            accept_length_ci=(value - half, value + half), n_requests=100, n_prompts=100,
            completion_tokens=tokens, verify_steps=steps, categories=categories,
            per_position_acceptance=[0.7, 0.4], per_position_ci=[(0.65, 0.75), (0.35, 0.45)]),
        verdict=rec.Verdict(status="pass" if value >= floor else "fail", reasons=reasons or []),
        paired=paired,
    )
    rows = [rec.RequestRow(index=0, question_index=0, completion_tokens=tokens,
                           verify_steps=steps, spec_accept_length=value, latency_s=1.0)]
    return save_run(root, record, rows)


def nightly_history(root: Path, nights: int = 8, drop_at: int = 4) -> dict[str, list[Path]]:
    """Two lines of one suite (main drops by 0.5 at night `drop_at`; release steady, main
    paired with it) and a workload entry with a main line only."""
    made: dict[str, list[Path]] = {"main": [], "release": [], "entry": []}
    for day in range(nights):
        release = night(root, day=day, accept=2.6 + 0.01 * (day % 2), label="release",
                        spec=RELEASE, sha="5" * 40)
        made["release"].append(release)
        made["main"].append(night(root, day=day, accept=(2.6 if day < drop_at else 2.1)
                                  + 0.01 * (day % 3), paired_with=release.name[-8:]))
        if day < 3:
            made["entry"].append(night(root, day=day, accept=2.3, series="suite_a.t06"))
    return made
