"""Run time = audit on vLLM's CPU DFlash (`nox -s vllm_cpu`): the recorder the harness puts
on the vLLM server's path (harness/engines/vllm/recorder) records what reached the draft,
and the run compares it with the audit's vLLM clauses for the vLLM it launched.

- The real suite: every clause the audit resolves, and each draft layer's attention at the
  CPU kernel, equal to the audit's; the run passes.
- A planted engine defect the audit cannot see (an environment hook, chained by the
  recorder's sitecustomize, that drops vLLM's `+ 1` from DFlash's `target_layer_ids`, so
  the target captures its taps one layer early): the run is an error (exit 3) naming the
  clause, before accept length is judged.
- Defects below everything vLLM configures, planted together in one launch on 8 questions
  (environment hooks as above; each is observed where it takes effect, by a check of its
  own, so one run names them all, and nothing else):
  - the draft's forward: its block's masked positions filled with token 0, the draft
    embedding through a private embedding and projecting through a private head: one line
    per clause, from what the draft's forward got (docs/audit.md, "Planted defects");
  - attention the kernel is handed differently (the metadata builder's windowed group made
    bidirectional): each draft layer named, from the CPU kernel's calls;
  - captures taken one boundary early in the target's loop, its configured list right: the
    taps named, from the layer boundary each captured tensor equals.
  The run is an error (exit 3).
- A block width the engine dies on (blocks of 7 laid out for a proposer that reads 8): the
  run errors in its warm-up, and the verdict names `block_size` from the record before the
  engine's error."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.files import default_results_dir
from harness.run import runtime_contract
from harness.run.provenance import harness_git
from tests.vllm_oracle.vllm_code import vllm_python

ROOT = Path(__file__).resolve().parents[2]
SUITE = "tiny_dflash_vllm_cpu"

# Drops the + 1 of GPUModelRunner._get_eagle3_aux_layers_from_config for a DFlash draft
# (DFlash's target_layer_ids are layer outputs; vLLM captures hidden_states[id + 1]).
PLANTED = r'''
import runpy


def plant(module):
    cls = module.GPUModelRunner
    original = cls._get_eagle3_aux_layers_from_config

    def early(self):
        layers = original(self)
        return tuple(i - 1 for i in layers) if layers else layers

    cls._get_eagle3_aux_layers_from_config = early


runpy.run_path(AFTER_IMPORT)["install"]({"vllm.v1.worker.gpu_model_runner": plant})
'''.replace("AFTER_IMPORT", repr(str(ROOT / "harness" / "engines" / "after_import.py")))


# Three defects in the draft's forward path, in one launch, none of them in what vLLM
# configures (the proposer's parallel_drafting_token_id, the modules _maybe_share_* gave the
# draft: all as the audit says):
# - DFlashProposer.set_inputs_first_pass hands the kernel that lays out the draft block
#   token 0 for the masked positions (vLLM's block: the bonus token, then the mask id);
# - DFlashQwen3Model.embed_input_ids embeds through a private copy of the embedding it
#   holds (the target's, shared at load);
# - DFlashQwen3ForCausalLM.compute_logits projects through a private copy of the head it
#   holds (the target's).
FORWARD_PLANTED = r'''
import copy
import runpy

import torch


def proposer(module):
    cls = module.DFlashProposer
    original = cls.set_inputs_first_pass

    def set_inputs_first_pass(self, *args, **kwargs):
        kept, self.parallel_drafting_token_id = self.parallel_drafting_token_id, 0
        try:
            return original(self, *args, **kwargs)
        finally:
            self.parallel_drafting_token_id = kept

    cls.set_inputs_first_pass = set_inputs_first_pass


def draft(module):
    def embed_input_ids(self, input_ids):
        own = self.__dict__.get("_private_embedding")
        if own is None:
            own = torch.nn.Embedding.from_pretrained(self.embed_tokens.weight.detach().clone())
            self.__dict__["_private_embedding"] = own
        return own(input_ids)

    module.DFlashQwen3Model.embed_input_ids = embed_input_ids
    cls = module.DFlashQwen3ForCausalLM
    original = cls.compute_logits

    def compute_logits(self, hidden_states):
        own = self.__dict__.get("_private_head")
        if own is None:
            own = self.__dict__["_private_head"] = copy.deepcopy(self.lm_head)
        held, self._modules["lm_head"] = self._modules["lm_head"], own
        try:
            return original(self, hidden_states)
        finally:
            self._modules["lm_head"] = held

    cls.compute_logits = compute_logits


runpy.run_path(AFTER_IMPORT)["install"]({"vllm.v1.spec_decode.dflash": proposer,
                                          "vllm.model_executor.models.qwen3_dflash": draft})
'''.replace("AFTER_IMPORT", repr(str(ROOT / "harness" / "engines" / "after_import.py")))
# DFlashProposer.set_inputs_first_pass lays out blocks of num_speculative_tokens (7) instead
# of num_speculative_tokens + 1 (8), the proposer's own count untouched: every buffer after
# it has the other width, so vLLM fails at its next reshape (an error, not a silent drop).
BLOCK_PLANTED = r'''
import runpy


def proposer(module):
    cls = module.DFlashProposer
    original = cls.set_inputs_first_pass

    def set_inputs_first_pass(self, *args, **kwargs):
        self.num_speculative_tokens -= 1
        try:
            return original(self, *args, **kwargs)
        finally:
            self.num_speculative_tokens += 1

    cls.set_inputs_first_pass = set_inputs_first_pass


runpy.run_path(AFTER_IMPORT)["install"]({"vllm.v1.spec_decode.dflash": proposer})
'''.replace("AFTER_IMPORT", repr(str(ROOT / "harness" / "engines" / "after_import.py")))
# CPUAttentionMetadataBuilder.build hands the kernel bidirectional attention for a group of
# windowed layers (the uniform draft's five, window 16; the tiny target's layers have no
# window and are untouched): a defect in what the kernel is given, below everything the
# audit resolves.
KERNEL_PLANTED = r'''
import runpy


def builder(module):
    cls = module.CPUAttentionMetadataBuilder
    original = cls.build

    def build(self, *args, **kwargs):
        metadata = original(self, *args, **kwargs)
        if self.window_size > 0:
            metadata.causal = False
        return metadata

    cls.build = build


runpy.run_path(AFTER_IMPORT)["install"]({"vllm.v1.attention.backends.cpu_attn": builder})
'''.replace("AFTER_IMPORT", repr(str(ROOT / "harness" / "engines" / "after_import.py")))
# EagleModelMixin._maybe_add_hidden_state captures the stream one boundary early at forward
# time (`if layer_idx + 1 in self.aux_hidden_state_layers`), the configured list untouched:
# the taps' forward level, below what the audit and the runner's configuration say.
CAPTURE_PLANTED = r'''
import runpy


def early(module):
    cls = module.EagleModelMixin

    def _maybe_add_hidden_state(self, aux_hidden_states, layer_idx, hidden_states, residual):
        if layer_idx + 1 in self.aux_hidden_state_layers:
            value = hidden_states + residual if residual is not None else hidden_states
            aux_hidden_states.append(value)
        return aux_hidden_states

    cls._maybe_add_hidden_state = _maybe_add_hidden_state


runpy.run_path(AFTER_IMPORT)["install"]({"vllm.model_executor.models.interfaces": early})
'''.replace("AFTER_IMPORT", repr(str(ROOT / "harness" / "engines" / "after_import.py")))
QUESTIONS = 8  # the planted copies: enough draft steps to record, at a fraction of the time


def _run(folder: Path, name: str, env: dict[str, str] | None = None,
         questions: int | None = None) -> tuple[subprocess.CompletedProcess[str], dict]:
    """`harness run` on a copy of the suite named `name` (its [engine.env] extended, its
    question count `questions` when given)."""
    text = (ROOT / "suites" / f"{SUITE}.toml").read_text().replace(
        f'name = "{SUITE}"', f'name = "{name}"')
    if questions is not None:
        assert "\nquestions = 20\n" in text
        text = text.replace("\nquestions = 20\n", f"\nquestions = {questions}\n")
    for key, value in (env or {}).items():
        text = text.replace("[engine.env]\n", f"[engine.env]\n{key} = {json.dumps(value)}\n")
    suite = folder / f"{name}.toml"
    suite.write_text(text)
    results = folder / "results"
    done = subprocess.run(
        [sys.executable, "-m", "harness", "run", str(suite), "--results", str(results),
         "--no-progress", "--no-plot"], cwd=ROOT, capture_output=True, text=True,
        timeout=1800, env={**os.environ, "PYTHONPATH": str(ROOT)}, check=False)
    records = sorted((results / "runs" / name).glob("*/run.json"))
    assert records, done.stdout[-3000:] + done.stderr[-3000:]
    return done, json.loads(records[-1].read_text())


def _this_checkouts_run() -> dict | None:
    """The run `nox -s vllm_cpu` made of the suite just before these tests (the newest
    under the default results folder), if this very checkout made it, clean, with the
    recorder's file beside it: the same launch measured again would say the same."""
    sha, dirty = harness_git()
    for path in sorted((default_results_dir() / "runs" / SUITE).glob("*/run.json"))[-1:]:
        record = json.loads(path.read_text())
        provenance = record.get("provenance") or {}
        if sha is not None and dirty is False and provenance.get("harness_git_sha") == sha \
                and provenance.get("harness_git_dirty") is False \
                and (path.parent / runtime_contract.RECORD_FILE).is_file():
            return record
    return None


def _planted_run(factory: pytest.TempPathFactory, folder: str, name: str, hook: str,
                 questions: int | None = None) -> tuple[subprocess.CompletedProcess[str], dict]:
    """`harness run` on a copy of the suite named `name` whose vLLM server starts with the
    environment hook `hook` (a sitecustomize the recorder's own chains) on its path."""
    vllm_python()  # the environment `harness run tiny_dflash_vllm_cpu` built (else skip)
    where = factory.mktemp(folder)
    (where / "hook").mkdir()
    (where / "hook" / "sitecustomize.py").write_text(hook)
    return _run(where, name, {"PYTHONPATH": str(where / "hook")}, questions)


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory):
    vllm_python()  # the environment `harness run tiny_dflash_vllm_cpu` built (else skip)
    record = _this_checkouts_run()
    if record is not None:  # its exit code: the one its verdict has
        code = 0 if record["verdict"]["status"] == "pass" else 1
        return subprocess.CompletedProcess(["harness", "run", SUITE], code, "", ""), record
    return _run(tmp_path_factory.mktemp("clean"), SUITE)


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory):
    return _planted_run(tmp_path_factory, "planted", f"{SUITE}_taps_early", PLANTED, QUESTIONS)


@pytest.fixture(scope="module")
def forward_planted(tmp_path_factory: pytest.TempPathFactory):
    """The draft's forward defects, the kernel's attention and the target's captures, one
    launch: three hooks on three separate paths (the draft, the attention metadata, the
    target's loop), each clause recorded where it takes effect."""
    return _planted_run(tmp_path_factory, "forward", f"{SUITE}_forward_defects",
                        FORWARD_PLANTED + KERNEL_PLANTED + CAPTURE_PLANTED, QUESTIONS)


def _runtime_lines(record: dict) -> list[str]:
    """The verdict's lines under its runtime-contract heading: the clauses that differ."""
    reasons = record["verdict"]["reasons"]
    assert reasons[0] == "the draft's runtime contract differs from the audit's for this build:"
    return [r for r in reasons[1:] if "reached the model as" in r
            or r.startswith("draft layer ")]


PLANTED_TOGETHER = {"mask_token_id", "embeddings", "lm_head", "taps",
                    *(f"draft layer {index}" for index in range(5))}


def test_only_the_defects_planted_together_are_named(forward_planted) -> None:
    """Each check names its own defect and none sees another's: what differs is exactly
    what was planted, and the run is an error before accept length is judged."""
    done, record = forward_planted
    assert done.returncode == 3, done.stdout[-3000:] + done.stderr[-3000:]
    assert record["verdict"]["status"] == "error"
    named = [line.split(":")[0] for line in _runtime_lines(record)]
    assert sorted(named) == sorted(PLANTED_TOGETHER), record["verdict"]["reasons"]


RESOLVED = {"taps": [1, 2, 3, 4], "block_size": 8, "mask_token_id": 2, "draft_layers": 5,
            "fc_input_width": 512}


def test_every_clause_that_reached_vllms_draft_equals_the_audit(clean) -> None:
    done, record = clean
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    audit, runtime = record["draft_contract"], record["draft_contract_runtime"]
    assert {name: audit[name]["value"] for name in RESOLVED} == RESOLVED
    assert {name: runtime[name]["value"] for name in RESOLVED} == RESOLVED
    assert audit["block_size"]["source"] == "--speculative-config num_speculative_tokens + 1"
    assert runtime["taps"]["source"] == "target aux_hidden_state_layers"
    # and at forward time, each captured tensor matched to the layer boundary it equals
    assert "[1, 2, 3, 4] (target forward: the layer boundary" in runtime["taps"]["note"]
    # the audit leaves them to the weights at load: vLLM's choice there, kept
    assert (runtime["embeddings"]["value"], runtime["lm_head"]["value"]) == ("target",
                                                                             "target")
    assert "DFlashQwen3Model.mask_token_id" in runtime["mask_token_id"]["note"]
    # and each as the draft's forward got it: its block, its embedding module, its head
    assert "8 (the draft forward's query block per request" in runtime["block_size"]["note"]
    assert "2 (the draft forward's input_ids after" in runtime["mask_token_id"]["note"]
    assert "target (the draft's embed_input_ids at its forward" in \
        runtime["embeddings"]["note"]
    assert "target (the draft's compute_logits at its forward" in runtime["lm_head"]["note"]
    assert "combine_hidden_states" in runtime["fc_input_width"]["note"]  # as delivered
    kernel = [(r["index"], r["causal"], r["window"]) for r in record["attention_runtime"]]
    assert kernel == [(i, True, 16) for i in range(5)]
    assert kernel == [(r["index"], r["causal"], r["window"]) for r in record["attention"]]
    assert record["verdict"]["status"] == "pass"


def test_taps_captured_one_layer_early_fail_the_run_naming_the_clause(planted) -> None:
    done, record = planted
    assert done.returncode == 3, done.stdout[-3000:] + done.stderr[-3000:]
    assert record["draft_contract"]["taps"]["value"] == [1, 2, 3, 4]  # the audit: unpatched
    assert record["draft_contract_runtime"]["taps"]["value"] == [0, 1, 2, 3]
    reasons = record["verdict"]["reasons"]
    assert record["verdict"]["status"] == "error"
    assert reasons[:2] == [
        "the draft's runtime contract differs from the audit's for this build:",
        "taps: reached the model as [0,1,2,3] (target aux_hidden_state_layers); the audit "
        "says [1,2,3,4] (draft config)"]
    assert not any(r.split(":")[0] in ("block_size", "mask_token_id", "draft_layers")
                   for r in reasons)  # only the planted clause differs


def test_forward_defects_in_the_draft_fail_the_run_naming_each_clause(forward_planted
                                                                      ) -> None:
    """The block filled with token 0, the draft embedding through its own module and
    projecting through its own head, while everything vLLM configured is as the audit
    says: one line per clause, from what the draft's forward got."""
    _, record = forward_planted
    lines = _runtime_lines(record)
    assert [line for line in lines if line.split(":")[0] in (
        "mask_token_id", "embeddings", "lm_head")] == [
        "mask_token_id: reached the model as 0 (the draft forward's input_ids after each "
        "request's first (the block's masked positions)); the audit says 2 (draft config)",
        "embeddings: reached the model as other (Embedding) (the draft's embed_input_ids at "
        "its forward (the embedding module that ran)); the engine chose target at load "
        "(DFlashProposer._maybe_share_embeddings)",
        "lm_head: reached the model as draft (the draft's compute_logits at its forward "
        "(the head its logits processor was given)); the engine chose target at load "
        "(DFlashProposer._maybe_share_lm_head)"], lines
    runtime = record["draft_contract_runtime"]
    # what vLLM configured is as the audit says: only the forward differs
    assert (runtime["mask_token_id"]["value"], runtime["embeddings"]["value"],
            runtime["lm_head"]["value"]) == (2, "target", "target")


@pytest.fixture(scope="module")
def block_planted(tmp_path_factory: pytest.TempPathFactory):
    return _planted_run(tmp_path_factory, "block", f"{SUITE}_block_of_7", BLOCK_PLANTED,
                        QUESTIONS)


def test_a_block_width_the_engine_dies_on_is_named_beside_its_error(block_planted) -> None:
    """The draft forward given blocks of 7 to a proposer that reads 8: vLLM dies at its next
    reshape, in the warm-up; the verdict names the clause the record caught before it died,
    then the engine's error."""
    done, record = block_planted
    assert done.returncode == 3, done.stdout[-3000:] + done.stderr[-3000:]
    reasons = record["verdict"]["reasons"]
    assert record["verdict"]["status"] == "error"
    assert reasons[0] == "the draft's runtime contract differs from the audit's for this build:"
    assert reasons[1].startswith("block_size: reached the model as 7 (the draft forward's "
                                 "query block per request"), reasons
    assert reasons[1].endswith("the audit says 8 (--speculative-config num_speculative_tokens "
                               "+ 1)"), reasons
    assert reasons[2].startswith("warm-up: "), reasons  # then the engine's error itself
    folder = next(line.split(":", 1)[1].strip() for line in done.stdout.splitlines()
                  if line.startswith("record:"))
    assert "shape '[-1, 7]' is invalid" in (Path(folder) / "server.log").read_text()
    assert record["draft_contract_runtime"]["block_size"]["value"] == 8  # as configured


def test_attention_the_kernel_is_handed_differently_fails_naming_each_layer(forward_planted
                                                                            ) -> None:
    """The metadata builder hands the draft's windowed layers bidirectional attention, the
    audit (vLLM's own layer resolver) still says causal, window 16: each draft layer
    named, from what the CPU kernel received."""
    _, record = forward_planted
    lines = _runtime_lines(record)
    assert [line for line in lines if line.startswith("draft layer ")] == [
        f"draft layer {index}: the extend kernel received bidirectional, window 16; the "
        "audit says causal, window 16" for index in range(5)], lines
    assert [(r["causal"], r["window"]) for r in record["attention"]] == [(True, 16)] * 5


def test_captures_taken_one_layer_early_at_forward_fail_naming_the_taps(forward_planted
                                                                        ) -> None:
    """The target's loop captures one boundary early while its configured list is right:
    the runner's list and the audit agree, and only what the forward captured names it."""
    _, record = forward_planted
    lines = _runtime_lines(record)
    assert [line for line in lines if line.startswith("taps:")] == [
        "taps: reached the model as [0,1,2,3] (target forward: the layer boundary each "
        "captured tensor equals (hidden_states[c], -1 for none)); the audit says [1,2,3,4] "
        "(draft config)"], lines
    runtime = record["draft_contract_runtime"]["taps"]
    assert runtime["value"] == [1, 2, 3, 4]  # as configured: target aux_hidden_state_layers
