"""SGLang 0.5.23's own DFLASH worker on CPU under the harness (suites/tiny_dflash_sglang_cpu).

The shipped suite passes, its figure is the server's own and every request's is exact;
the runtime table (what the attention kernel received per draft layer) equals the audit's;
PR #34524's default reverted by a user patch is caught by the preflight audit on the
patched tree's own code and, measured anyway, by the paired gate against the release; a
backend fault the audit cannot see is caught by the runtime check, and so are the taps
moved one layer early in the target's forward loop (the capture observed when it is taken):
the two planted in one launch, each named by its own check and nothing else.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from harness import builds
from harness.results.layout import RUN_PNG
from tests.sglang_dflash_cpu.conftest import (
    REPO,
    REVERT,
    SPEC,
    STAND_IN,
    SUITE,
    TEST_PATCH,
    Run,
    harness_run,
)

CONTRACT = [(True, 16)] * 4 + [(False, None)]  # suites/tiny_dflash_sglang_cpu.toml
REVERTED = [(False, 16)] * 4 + [(False, None)]


def _record(run: Run, series: str = SUITE, label: str | None = None) -> dict[str, Any]:
    records = [json.loads(p.read_text()) for p in run.records(series)]
    records = [r for r in records if label is None or r.get("label") == label]
    assert records, run.output
    return records[-1]


def test_the_shipped_suite_passes(fixed: Run, sglang_cpu: Any) -> None:
    assert fixed.done.returncode == 0, fixed.output
    record = _record(fixed)
    assert record["verdict"]["status"] == "pass", record["verdict"]
    measured = record["measurement"]
    assert measured["n_requests"] == measured["n_planned"] == 100
    exact = (measured["correct_drafts"] + measured["verify_steps"]) / measured["verify_steps"]
    assert measured["accept_length_server_avg"] == pytest.approx(exact, abs=1e-12)
    # SGLang's own /server_info figure for the same window (--decode-log-interval 1)
    assert measured["server_reported_accept_length"] == pytest.approx(
        measured["accept_length_server_avg"], abs=1e-9)
    build, provenance = record["build"], record["provenance"]
    assert (build["version"], build["spec"], build["patch_sha256"]) == ("0.5.23", SPEC, None)
    assert build["source_hash"].startswith("sha256:")  # the patched tree that ran
    assert provenance["test_patches_sha256"] == {str(TEST_PATCH): builds.file_sha256(TEST_PATCH)}
    assert provenance["stand_ins_sha256"] == {str(STAND_IN): builds.folder_sha256(STAND_IN)}
    command = record["launch"]["command"]
    assert command[command.index("--speculative-algorithm") + 1] == "DFLASH"
    assert command[command.index("--speculative-draft-attention-backend") + 1] == "intel_amx"
    assert (fixed.records()[-1].parent / RUN_PNG).stat().st_size > 0


def test_every_request_is_exact(fixed: Run) -> None:
    """Each request's figures: SGLang's own per-request accept length (meta_info
    spec_accept_length) is completion tokens over verify steps; its histogram of accepted
    drafts per step accounts for every step and every correct draft; the pooled figures
    are those sums, exactly (harness/metrics/measure.py)."""
    run_dir = fixed.records()[-1].parent
    rows = [json.loads(line) for line in (run_dir / "requests.jsonl").read_text().splitlines()]
    assert len(rows) == 100
    for row in rows:
        steps, correct = row["verify_steps"], row["correct_drafts"]
        assert row["spec_accept_length"] == pytest.approx(row["completion_tokens"] / steps,
                                                          abs=1e-9), row
        histogram = row["accept_histogram"]
        assert sum(histogram) == steps and len(histogram) <= 8, row  # 0..7 drafts accepted
        assert sum(i * n for i, n in enumerate(histogram)) == correct, row
        # the last step may be cut by the stop string: never more tokens than steps made
        assert row["completion_tokens"] - 1 <= correct + steps, row
    measured = _record(fixed)["measurement"]
    steps = sum(r["verify_steps"] for r in rows)
    assert measured["accept_length_per_request"] == sum(
        r["completion_tokens"] for r in rows) / steps
    assert measured["accept_length_server_avg"] == sum(
        r["correct_drafts"] + r["verify_steps"] for r in rows) / steps


def test_runtime_attention_equals_the_audit(fixed: Run) -> None:
    record = _record(fixed)
    audit = [(layer["causal"], layer["window"]) for layer in record["attention"]]
    assert audit == CONTRACT
    runtime = {(r["index"], r["kernel"]): (r["causal"], r["window"])
               for r in record["attention_runtime"]}
    assert {index for index, _ in runtime} == set(range(5))
    assert [runtime[(i, "extend")] for i in range(5)] == CONTRACT


def test_the_reverted_default_is_caught_by_the_preflight(sglang_cpu: Any,
                                                          tmp_path: Any) -> None:
    """`--patch` on the release: the audit reads the patched tree's own code, before any
    launch, and names the four sliding layers (the full layer was bidirectional anyway)."""
    run = harness_run(SUITE, tmp_path / "results", "--patch", str(REVERT))
    assert run.done.returncode == 1, run.output
    record = _record(run)
    assert record["verdict"]["status"] == "fail" and record["launch"] is None
    reasons = record["verdict"]["reasons"]
    assert reasons[0] == ("draft contract differs from the suite's "
                          "expected_layers/expected_contract:")
    assert reasons[1:] == [f"layer {i}: expected causal, got bidirectional" for i in range(4)]
    assert not (run.records()[-1].parent / "server.log").exists()  # nothing was launched
    assert "layer 0: expected causal, got bidirectional" in run.done.stdout + run.done.stderr


def test_the_reverted_default_is_caught_by_the_paired_gate(reverted_paired: Run) -> None:
    assert reverted_paired.done.returncode == 1, reverted_paired.output
    assert "reusing run" in reverted_paired.done.stdout + reverted_paired.done.stderr
    record = _record(reverted_paired, label="reverted")
    assert record["verdict"]["status"] == "fail"
    assert record["build"]["patch_sha256"] == builds.file_sha256(REVERT)
    assert [(layer["causal"], layer["window"]) for layer in record["attention"]] == REVERTED
    # the kernel received what the reverted code decided: runtime and audit agree
    runtime = {r["index"]: (r["causal"], r["window"]) for r in record["attention_runtime"]
               if r["kernel"] == "extend"}
    assert [runtime[i] for i in range(5)] == REVERTED
    paired = record["paired"]
    assert (paired["status"], paired["floors_status"]) == ("fail", "pass"), paired
    assert paired["result"]["decision"] == "worse", paired  # beyond the 2% tolerated
    assert paired["against"]["reused"] and paired["against"]["spec"] == SPEC
    assert any("contract differs (not enforced)" in r for r in record["verdict"]["reasons"])


RUNTIME_FAULTS = "tiny_dflash_sglang_cpu_runtime_faults"


def _runtime_lines(record: dict[str, Any]) -> list[str]:
    """The verdict's lines under its runtime-contract heading, up to the next heading."""
    reasons = record["verdict"]["reasons"]
    assert reasons[0] == "the draft's runtime contract differs from the audit's for this build:"
    return reasons[1:reasons.index(
        "draft contract differs from the suite's expected_layers/expected_contract:")]


# What the runtime record names of the faults planted together, in the verdict's order:
# the draft layer whose kernel call changed, the taps, the draft step's four clauses
RUNTIME_NAMED = ["draft layer 4", "taps", "block_size", "mask_token_id", "embeddings",
                 "lm_head"]


def test_the_runtime_faults_are_named_and_nothing_else(runtime_faults: tuple[Run, Any]
                                                       ) -> None:
    """The faults planted together, each on a path of its own: the preflight passes (the
    audit resolves what it did before), the run is an error (exit 3) naming exactly the
    draft step's four clauses, the one draft layer whose kernel call changed and the taps."""
    run, patch = runtime_faults
    assert run.done.returncode == 3, run.output
    record = _record(run, RUNTIME_FAULTS)
    assert record["verdict"]["status"] == "error"
    assert record["build"]["patch_sha256"] == builds.file_sha256(patch)
    assert [line.split(":")[0] for line in _runtime_lines(record)] == RUNTIME_NAMED


def test_a_fault_only_the_runtime_check_sees(runtime_faults: tuple[Run, Any]) -> None:
    """The intel_amx backend ignores ENCODER_ONLY: the full layer reaches the kernel causal,
    while the draft's config and SGLang's resolver still say bidirectional."""
    run, _ = runtime_faults
    lines = _runtime_lines(_record(run, RUNTIME_FAULTS))
    assert ("draft layer 4: the extend kernel received causal, no window; the audit says "
            "bidirectional, no window") in lines
    assert not any(line.startswith("draft layer 0") for line in lines)  # causal anyway


CLAUSES = {"taps": [1, 2, 3], "block_size": 8, "mask_token_id": 2, "draft_layers": 5,
           "fc_input_width": 384, "embeddings": "target", "lm_head": "target"}


def test_runtime_contract_equals_the_audit(fixed: Run) -> None:
    """Every clause beyond attention: the preflight audit's (the build's own code, against
    the target served) equals what reached the draft (the stand-ins' record), and both are
    the suite's expected_contract."""
    record = _record(fixed)
    audit, runtime = record["draft_contract"], record["draft_contract_runtime"]
    assert {name: audit[name]["value"] for name in CLAUSES} == CLAUSES
    assert {name: runtime[name]["value"] for name in CLAUSES} == CLAUSES
    assert audit["block_size"]["source"] == "--speculative-num-draft-tokens"
    # observed when each capture is taken in the target's forward, not the configured list
    assert runtime["taps"]["source"].startswith("target forward: captures taken after")
    assert "project_target_hidden" in runtime["fc_input_width"]["note"]  # as delivered
    for clause in ("block_size", "mask_token_id"):  # as the draft's block was given them
        assert "embed_module(block_ids)" in runtime[clause]["note"]


def test_a_capture_moved_at_forward_time_is_caught_at_run_time(runtime_faults: tuple[Run, Any]
                                                               ) -> None:
    """Qwen3Model's loop hands each capture to the layer before, `layers_to_capture`
    untouched: the audit's configured list is right, and the run names the taps the
    forward actually took."""
    run, _ = runtime_faults
    record = _record(run, RUNTIME_FAULTS)
    assert record["draft_contract"]["taps"]["value"] == [1, 2, 3]  # the audit's
    assert record["draft_contract_runtime"]["taps"]["value"] == [0, 1, 2]
    assert record["draft_contract_runtime"]["fc_input_width"]["value"] == 384  # unchanged
    lines = _runtime_lines(record)
    assert any(r.startswith("taps: reached the model as [0,1,2] (target forward") and
               r.endswith("the audit says [1,2,3] (dflash_config)") for r in lines), lines


def test_forward_time_defects_in_the_draft_step_are_each_named(runtime_faults: tuple[Run, Any]
                                                               ) -> None:
    """The worker's draft step given the wrong block size (set_block_size never called),
    mask id (a zero-filled block), embeddings (the head's weight) and head (a private copy
    of the target's), its configuration untouched: the preflight passes (the audit
    resolves what it did before), and the run names those four clauses from what the
    draft forward was given and called."""
    run, _ = runtime_faults
    record = _record(run, RUNTIME_FAULTS)
    audit = {name: row["value"] for name, row in record["draft_contract"].items()}
    assert {name: audit[name] for name in CLAUSES} == {**CLAUSES, "block_size": 4}
    reasons = _runtime_lines(record)
    differing = {r.split(":")[0] for r in reasons if "reached the model as" in r}
    assert differing == {"block_size", "mask_token_id", "embeddings", "lm_head", "taps"}, \
        reasons  # the taps: the capture moved in the target's forward, planted beside
    shown = "\n".join(reasons)
    for line in ("block_size: reached the model as 8 (the draft forward's own block_size",
                 "mask_token_id: reached the model as 0 (the draft forward's block",
                 "embeddings: reached the model as other (no embedding module's output) "
                 "(the draft forward's input_embeds",
                 "lm_head: reached the model as other (Embedding) (the draft "
                 "step's head"):
        assert line in shown, reasons
    runtime = record["draft_contract_runtime"]
    # the worker's own configuration is right: what it holds equals the audit's
    assert "4 (DFlashWorkerV2.__init__)" in runtime["block_size"]["note"]
    assert "2 (DFlashWorkerV2.__init__)" in runtime["mask_token_id"]["note"]


@pytest.mark.parametrize("clause", ["taps", "mask_token_id", "block_size", "fc_input_width"])
def test_every_planted_defect_is_caught_by_the_preflight(sglang_cpu: Any, tmp_path: Any,
                                                         clause: str) -> None:
    from tests.audit.planted import run_arguments

    suite, *extra = run_arguments(clause, tmp_path / "planted")
    run = harness_run(suite, tmp_path / "results", *extra[2:])  # its --sglang is SPEC
    assert run.done.returncode == 1, run.output
    record = _record(run)
    assert record["launch"] is None  # nothing was launched
    assert any(reason.startswith(f"{clause}: expected ") for reason in
               record["verdict"]["reasons"]), record["verdict"]


def test_a_planted_defect_measured_anyway_fails_from_what_reached_the_model(
        sglang_cpu: Any, tmp_path_factory: pytest.TempPathFactory) -> None:
    """The taps one layer early (Qwen3's + 1 dropped), measured anyway on a short copy of
    the suite: the stand-ins record hidden_states 0-2 reaching the draft, equal to the
    patched build's audit (no runtime error), and the run fails naming the clause."""
    from tests.audit.planted import DEFECTS

    folder = tmp_path_factory.mktemp("planted-taps")
    short = folder / "tiny_dflash_sglang_cpu_taps.toml"
    short.write_text((REPO / "suites" / f"{SUITE}.toml").read_text().replace(
        "questions = 100", "questions = 8").replace(
        f'name = "{SUITE}"', 'name = "tiny_dflash_sglang_cpu_taps"'))
    run = harness_run(short, folder / "results", "--patch", str(DEFECTS["taps"].patch),
                      "--no-enforce-contract", "--no-plot")
    assert run.done.returncode == 1, run.output
    record = _record(run, "tiny_dflash_sglang_cpu_taps")
    assert record["draft_contract_runtime"]["taps"]["value"] == [0, 1, 2]
    reasons = record["verdict"]["reasons"]
    assert any("taps: expected [1,2,3], the engine at run time resolves [0,1,2]" in reason
               for reason in reasons), reasons
