"""A change to SGLang judged before a GPU (`harness audit --change BEFORE AFTER`): every corpus
draft whose resolved contract it alters, on SGLang 0.5.23's wheel and patches to it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.audit.change import judge_change
from harness.audit.corpus import load_corpus, sglang_columns
from harness.audit.source import SGLangSourceError, patched_source, tree_source
from harness.cli import main
from tests.audit.conftest import REPO_ROOT, release_sources

CORPUS = Path(__file__).with_name("corpus")
REVERT = REPO_ROOT / "tests" / "sglang_dflash_cpu" / "revert_pr_34524.diff"
REQUIRE = Path(__file__).with_name("changes") / "require_target_layer_ids.diff"
TAPS = Path(__file__).with_name("changes") / "qwen3_taps_one_early.diff"
FORWARD = Path(__file__).with_name("changes") / "qwen3_capture_one_early_at_forward.diff"


@pytest.fixture(scope="module")
def release():
    [source] = release_sources("0.5.23")
    return source


@pytest.fixture(scope="module")
def drafts(release):
    corpus = load_corpus(CORPUS)
    # Every patched tree this module judges, answered in one batch: one worker process
    # for them all (same transformers pin, same SGLang patches) instead of one per test;
    # the tests below read the answers from the session's cache.
    sglang_columns(corpus, [release, *(patched_source(release, patch)
                                       for patch in (REVERT, REQUIRE, TAPS))])
    return corpus


def changed(drafts, before, after) -> dict[str, dict[str, tuple[str, str]]]:
    columns = sglang_columns(drafts, [before, after])
    return {d.draft: {c.clause: (c.before, c.after) for c in d.changes}
            for d in judge_change([d.name for d in drafts], columns)}


def test_the_regressed_default_flips_the_sliding_drafts_and_spares_muse(release,
                                                                       drafts) -> None:
    """PR #34524 reverted (the default PR #34262 introduced): every draft whose sliding
    layers took their causality from the default turns bidirectional; Muse Glimmer's
    assistant and the DFlash 2 draft declare is_causal false and do not change."""
    found = changed(drafts, release, patched_source(release, REVERT))
    assert set(found) == {"seed-gemma-4-31b-it-dflash", "tiny-draft-capturable",
                          "nemotron-3.5-dflash", "specforge-qwen3.6-27b-dflash"}
    for clauses in found.values():
        assert set(clauses) == {"attention"}
    before, after = found["seed-gemma-4-31b-it-dflash"]["attention"]
    assert before.startswith("causal/2048x4,bidir") and after.startswith("bidir/2048x4,bidir")
    # PR #34524 itself (regressed -> fixed) restores them and leaves Muse's assistant alone
    back = changed(drafts, patched_source(release, REVERT), release)
    assert set(back) == set(found)
    assert "zlab-muse-glimmer-assistant" not in back


def test_requiring_target_layer_ids_refuses_exactly_the_drafts_that_omit_them(release,
                                                                             drafts) -> None:
    omit = {d.name for d in drafts if d.declared["taps"] is None}
    assert omit == {"seed-gemma-4-31b-it-dflash"}
    found = changed(drafts, release, patched_source(release, REQUIRE))
    assert set(found) == omit
    before, after = found["seed-gemma-4-31b-it-dflash"]["fc_input_width"]
    # five fallback taps x the hidden_size Qwen3Config fills in (the shape declares none)
    assert before == str(5 * 4096) and after.startswith("refuses: ValueError: DFLASH draft config "
                                                "must define dflash_config.target_layer_ids")


def test_dropping_the_capture_plus_one_moves_every_qwen3_target_one_layer_early(
        release, drafts) -> None:
    found = changed(drafts, release, patched_source(release, TAPS))
    qwen3 = {d.name for d in drafts
             if d.target is not None and d.target.architecture == "Qwen3ForCausalLM"}
    assert set(found) == qwen3
    assert found["tiny-draft-capturable"] == {
        "taps": ("[1,2,3] (dflash_config)", "[0,1,2] (dflash_config)")}


def test_a_capture_moved_at_forward_time_is_invisible_to_the_static_audit(
        release, drafts) -> None:
    """The audit's blind spot, stated: the same taps one layer early, moved in Qwen3Model's
    forward loop instead of its configuration, changes no resolved clause (the run-time
    record catches it: tests/sglang_dflash_cpu, docs/audit.md "Planted defects")."""
    assert changed(drafts, release, patched_source(release, FORWARD)) == {}


def test_a_patch_that_does_not_apply_is_bad_input_naming_it(release, tmp_path: Path) -> None:
    patch = tmp_path / "other.diff"
    patch.write_text(TAPS.read_text().replace("[val + 1 for val in layer_ids]",
                                              "[val + 2 for val in layer_ids]"))
    with pytest.raises(SGLangSourceError, match=r"other\.diff does not apply"):
        patched_source(release, patch)
    outside = tmp_path / "docs.diff"
    outside.write_text("diff --git a/docs/x.md b/docs/x.md\n--- a/docs/x.md\n+++ b/docs/x.md\n"
                       "@@ -1 +1 @@\n-a\n+b\n")
    with pytest.raises(SGLangSourceError, match="changes no file under python/sglang/"):
        patched_source(release, outside)


def test_cli_change_lists_the_drafts_and_exits_1(release, capsys, tmp_path: Path) -> None:
    spec = f"{release.origin}+{REQUIRE}"
    assert tree_source(spec).short.endswith("require_target_layer_ids.diff")
    code = main(["audit", "--corpus", str(CORPUS), "--change", release.origin, spec,
                 "--json"])
    assert code == 1
    report = json.loads(capsys.readouterr().out)
    assert [d["draft"] for d in report["changed"]] == ["seed-gemma-4-31b-it-dflash"]
    assert report["changed"][0]["refused_after"] is True
    assert main(["audit", "--corpus", str(CORPUS), "--change", release.origin,
                 release.origin]) == 0
