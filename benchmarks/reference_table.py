"""The reference engine under each SGLang causality behaviour and draft-noise setting.

Runs the tiny suite through the real pipeline (`harness.run.runner.run_suite`: server
process, HTTP, GSM8K prompts, exact accept length, bootstrap CI, verdict) once per
setting, on the same checkpoint, and prints the Markdown table kept in
docs/reference-engine.md. Needs the reference extra in this environment.

    python benchmarks/reference_table.py [--questions N] [--noise 0.1 0.25 0.5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from harness.metrics.definitions import numerator
from harness.results.baselines import save_baseline
from harness.results.layout import REQUESTS_FILE
from harness.results.record import RunRecord
from harness.run.runner import RunOptions, run_suite
from harness.suite.model import LoadedSuite, Suite, load_suite
from harness.suite.schema import document_sha256


def variant(base: LoadedSuite, questions: int, policy: str, noise: float) -> LoadedSuite:
    document = json.loads(json.dumps(base.document))
    document["engine"] |= {"attention_policy": policy, "draft_noise": noise}
    document["workload"]["questions"] = questions
    if policy != "fixed":
        # The suite's contract would stop these runs in preflight (as it should); the
        # table measures what the behaviour would have cost.
        document.get("draft", {}).pop("expected_layers", None)
    return LoadedSuite(suite=Suite.model_validate(document), path=base.path,
                       sha256=document_sha256(document), document=document)


def keep_as_baseline(results: Path, record: RunRecord, policy: str, noise: float) -> Path:
    label = f"reference {policy}" + (f" noise {noise:g}" if noise else "")
    baseline = record.model_copy(update={
        "kind": "baseline", "label": label, "external": False,
        "source": f"measured here with the CPU reference engine ({policy} policy, draft noise "
                  f"{noise:g}) by benchmarks/reference_table.py --save-baselines",
    })
    return save_baseline(results, baseline)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", default="tiny_dflash_cpu")
    parser.add_argument("--questions", type=int, default=None)
    parser.add_argument("--noise", type=float, nargs="*", default=[0.1, 0.25, 0.5])
    parser.add_argument("--save-baselines", type=Path, metavar="RESULTS",
                        help="also keep the fixed-policy run and the first noise setting as "
                        "baseline records under RESULTS/baselines (marked measured here)")
    args = parser.parse_args(argv)
    base = load_suite(args.suite)
    questions = args.questions or base.suite.workload.questions
    settings = [(policy, 0.0) for policy in ("fixed", "legacy", "regressed")]
    settings += [("fixed", noise) for noise in args.noise]
    print(f"suite {base.suite.name}, {questions} questions, floor "
          f"{base.suite.floors.accept_length:g}")
    metric = base.suite.floors.metric
    print(f"| policy | draft noise | accept length ({metric}) | 95% CI | per_request | "
          "server's own figure | per-prompt min / max / sd | verdict | wall s |")
    print("|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as results:
        for policy, noise in settings:
            started = time.perf_counter()
            outcome = run_suite(variant(base, questions, policy, noise),
                                RunOptions(results_dir=Path(results), plot=False,
                                           progress=False))
            wall = time.perf_counter() - started
            measurement = outcome.record.measurement if outcome.record else None
            if outcome.run_dir is None or measurement is None:
                print(f"| {policy} | {noise:g} | error: {'; '.join(outcome.reasons)} |")
                continue
            kept = {("fixed", 0.0), *(("fixed", n) for n in args.noise[:1])}
            if args.save_baselines and (policy, noise) in kept:
                keep_as_baseline(args.save_baselines, outcome.record, policy, noise)
            rows = [json.loads(line) for line in
                    (outcome.run_dir / REQUESTS_FILE).read_text().splitlines()]
            per_prompt = [numerator(r, metric) / r["verify_steps"] for r in rows
                          if r["verify_steps"]]
            low, high = measurement.accept_length_ci or (float("nan"), float("nan"))
            server = measurement.server_reported_accept_length
            print(f"| {policy} | {noise:g} | {measurement.accept_length:.4f} | "
                  f"{low:.3f}-{high:.3f} | {measurement.accept_length_per_request:.4f} | "
                  f"{server if server is None else f'{server:.4f}'} | "
                  f"{min(per_prompt):.2f} / {max(per_prompt):.2f} / "
                  f"{statistics.stdev(per_prompt):.2f} | {outcome.status} | {wall:.1f} |",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
