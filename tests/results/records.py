"""Synthetic run records (written through harness.results.record) for the analysis tests."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

from harness.analysis.simulate import simulate_prompts
from harness.metrics import stats
from harness.results import record as rec
from harness.results.writer import save_run

SUITE_DOCUMENT = {
    "name": "tiny_dflash_cpu",
    "engine": {"kind": "reference"},
    "topology": {"gpus": 0},
    "floors": {"accept_length": 2.0, "metric": "per_request"},
    "baselines": [
        {"label": "pre-fix", "accept_length": 1.8, "source": "synthetic", "external": True},
        {"label": "post-fix", "accept_length": 2.6, "source": "synthetic", "external": True},
    ],
}


def make_run(
    root: Path,
    accept_length: float = 2.5,
    n: int = 40,
    seed: int = 0,
    label: str | None = None,
    spec: str | None = "reference",
    started_at: datetime | None = None,
    suite: str = "tiny_dflash_cpu",
    floor: float = 2.0,
) -> Path:
    """Write one synthetic run (record + request rows) under `root`; returns its folder."""
    tokens, steps = simulate_prompts(n, accept_length, prompt_sd=0.4, seed=seed)
    estimate = stats.accept_length(tokens, steps)
    histogram = [int(steps.sum() * 0.3), int(steps.sum() * 0.3), int(steps.sum() * 0.4)]
    rows = [
        rec.RequestRow(
            index=i,
            question_index=i + 5,
            completion_tokens=int(t),
            verify_steps=int(s),
            spec_accept_length=float(t / s),
            latency_s=0.5,
            correct=bool(i % 3),
            accept_histogram=[int(s * 0.3), int(s * 0.3), int(s) - 2 * int(s * 0.3)],
        )
        for i, (t, s) in enumerate(zip(tokens, steps, strict=True))
    ]
    document = dict(SUITE_DOCUMENT, name=suite,
                    floors={"accept_length": floor, "metric": "per_request"})
    record = rec.RunRecord(
        run_id=rec.new_run_id(),
        label=label,
        started_at=started_at or datetime.now(UTC),
        suite=rec.SuiteInfo(name=suite, sha256="0" * 64, document=document),
        build=rec.BuildInfo(engine="reference", spec=spec),
        provenance=rec.Provenance(harness_version="0.1.0", python="3.11", platform="test"),
        measurement=rec.Measurement(
            metric="per_request",  # synthetic rows carry no correct-draft counts
            accept_length=estimate,
            accept_length_per_request=estimate,
            accept_length_ci=stats.bootstrap_ci(tokens, steps, n_boot=200),
            n_requests=n,
            completion_tokens=int(tokens.sum()),
            verify_steps=int(steps.sum()),
            accept_histogram=histogram,
            per_position_acceptance=stats.per_position_acceptance(histogram),
            accuracy=sum(bool(i % 3) for i in range(n)) / n,
        ),
        verdict=rec.Verdict(status="pass" if estimate >= floor else "fail"),
    )
    return save_run(root, record, rows)


def make_history(root: Path, nights: int = 6, suite: str = "tiny_dflash_cpu") -> list[Path]:
    start = datetime(2025, 1, 1, tzinfo=UTC)
    return [
        make_run(root, 2.5 - 0.1 * (i % 3), seed=i, started_at=start + timedelta(days=i),
                 label="nightly", suite=suite)
        for i in range(nights)
    ]


def make_night(
    root: Path,
    tokens: Sequence[int],
    steps: Sequence[int],
    started_at: datetime,
    spec: str | None = "reference",
    data_sha256: str = "d" * 64,
    questions: Sequence[int] | None = None,
    suite: str = "tiny_dflash_cpu",
    label: str | None = "nightly",
    git_sha: str | None = None,
) -> Path:
    """One night of a fixed prompt set: question `questions[i]` (default i) answered with
    `tokens[i]` over `steps[i]` verify steps, its prompt tokens the same every night
    (`prompt_sha256` from the question and data hash), the record's figure and CI computed
    from those rows as a run computes them."""
    questions = list(range(len(tokens))) if questions is None else list(questions)
    estimate = stats.accept_length(tokens, steps)
    rows = [
        rec.RequestRow(
            index=i, question_index=q, completion_tokens=int(t), verify_steps=int(s),
            spec_accept_length=float(t / s), latency_s=0.5,
            prompt_sha256=hashlib.sha256(f"{data_sha256}:{q}".encode()).hexdigest())
        for i, (q, t, s) in enumerate(zip(questions, tokens, steps, strict=True))
    ]
    record = rec.RunRecord(
        run_id=rec.new_run_id(), label=label, started_at=started_at,
        suite=rec.SuiteInfo(name=suite, sha256="0" * 64, document=dict(SUITE_DOCUMENT,
                                                                         name=suite)),
        build=rec.BuildInfo(engine="reference", spec=spec, git_sha=git_sha),
        workload=rec.WorkloadInfo(kind="gsm8k", n_prompts=len(rows), data_sha256=data_sha256),
        provenance=rec.Provenance(harness_version="0.1.0", python="3.11", platform="test",
                                  data_sha256=data_sha256),
        measurement=rec.Measurement(
            metric="per_request", accept_length=estimate,
            accept_length_per_request=estimate,
            accept_length_ci=stats.bootstrap_ci(tokens, steps, n_boot=200),
            n_requests=len(rows), completion_tokens=int(sum(tokens)),
            verify_steps=int(sum(steps))),
        verdict=rec.Verdict(status="pass" if estimate >= 2.0 else "fail"),
    )
    return save_run(root, record, rows)


def paired_block(b: float, against: dict[str, object], **result: object) -> dict[str, object]:
    """A record's `paired` block: a not_worse finding of B = `b` against A = 2.6 (the
    post-fix baseline) over 40 questions, from the run `against`; `result` adds its fields."""
    a = 2.6
    return {"against": against, "status": "pass", "floors_status": "pass",
            "result": {"decision": "not_worse", "n": 40, "a": a, "b": b, "difference": b - a,
                       "difference_ci": [b - a - 0.1, b - a + 0.1], "level": 0.9,
                       "relative_change": (b - a) / a, "tolerated_drop": 0.05, **result}}
