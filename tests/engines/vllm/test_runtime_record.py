"""The vLLM recorder (harness/engines/vllm/recorder) on vLLM-shaped objects (no vLLM
needed): what it reads from a loaded DFlash drafter and target, the kernel calls of the
draft's layers, and the harness's comparison of both with the audit (runtime_contract.py,
runtime_attention.py). The real server's record: tests/vllm_oracle/test_runtime_record.py."""

from __future__ import annotations

import subprocess
import sys
import types
from pathlib import Path

import pytest
import torch

from harness.engines.vllm.recorder import FOLDER
from harness.results.record import ClauseRow, LayerRow
from harness.run import runtime_attention, runtime_contract


@pytest.fixture
def recorder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.syspath_prepend(str(FOLDER))
    import vllm_record

    clauses = tmp_path / runtime_contract.RECORD_FILE
    kernel = tmp_path / runtime_attention.RECORD_FILE
    monkeypatch.setenv(vllm_record.CONTRACT_ENV, str(clauses))
    monkeypatch.setenv(vllm_record.ATTENTION_ENV, str(kernel))
    assert vllm_record.CONTRACT_ENV == runtime_contract.RECORD_ENV
    assert vllm_record.ATTENTION_ENV == runtime_attention.RECORD_ENV
    assert vllm_record.DRAFT_MODEL == runtime_attention.DRAFT_MODEL
    vllm_record._DRAFT_LAYERS.clear()
    vllm_record._SEEN.clear()
    yield vllm_record, clauses, kernel
    sys.modules.pop("vllm_record", None)


def _vllm_shaped(aux: tuple[int, ...], k: int = 7, mask_id: int = 2,
                 windows: tuple[int | None, ...] = (16, 16, 16)):
    """A model runner after load_model: the target (Qwen3ForCausalLM: .model with
    aux_hidden_state_layers and embed_tokens, .lm_head) and its DFlashProposer."""

    class CPUAttentionBackendImpl:  # vllm/v1/attention/backends/cpu_attn.py's shape
        def __init__(self, window: int | None) -> None:
            self.sliding_window = -1 if window is None else window

        def forward(self, layer, query, key, value, kv_cache, attn_metadata, output=None):
            return output

    target = types.SimpleNamespace(
        model=types.SimpleNamespace(aux_hidden_state_layers=(),
                                    embed_tokens=torch.nn.Embedding(16, 4)),
        lm_head=torch.nn.Linear(4, 16, bias=False))
    layers = [types.SimpleNamespace(self_attn=types.SimpleNamespace(
        attn=types.SimpleNamespace(impl=CPUAttentionBackendImpl(w),
                                   layer_name=f"model.layers.{5 + i}.self_attn.attn")))
        for i, w in enumerate(windows)]
    inner = types.SimpleNamespace(layers=layers, mask_token_id=mask_id,
                                  fc=types.SimpleNamespace(input_size=384),
                                  embed_tokens=target.model.embed_tokens)
    inner.embed_input_ids = lambda ids: inner.embed_tokens(ids)  # DFlashQwen3Model's
    inner.forward = lambda input_ids, positions=None: inner.embed_input_ids(input_ids)

    class LogitsProcessor(torch.nn.Module):
        def forward(self, lm_head, hidden_states):
            return hidden_states @ lm_head.weight.T

    draft = types.SimpleNamespace(model=inner, lm_head=target.lm_head,
                                  combine_hidden_states=lambda hidden: hidden,
                                  logits_processor=LogitsProcessor())
    draft.compute_logits = lambda hidden: draft.logits_processor(draft.lm_head, hidden)
    drafter = types.SimpleNamespace(method="dflash", model=draft, num_speculative_tokens=k,
                                    parallel_drafting_token_id=mask_id,
                                    eagle3_use_aux_hidden_state=True)

    class GPUModelRunner:
        def __init__(self) -> None:
            self.model, self.drafter = target, drafter

        def get_model(self):
            return self.model

        def _setup_eagle3_aux_hidden_state_outputs(self) -> None:
            self.model.model.aux_hidden_state_layers = tuple(sorted(set(aux)))

    runner_module = types.ModuleType("gpu_model_runner")
    runner_module.GPUModelRunner = GPUModelRunner
    attention_module = types.ModuleType("cpu_attn")
    attention_module.CPUAttentionBackendImpl = CPUAttentionBackendImpl
    return runner_module, attention_module, layers


def _block(vllm_record, width: int, fill: int, requests: int = 2) -> torch.Tensor:
    """The draft forward's input_ids for `requests` blocks of `width` (a bonus token, then
    `fill`), and its first layer's attention metadata (vLLM's forward context) to match."""
    starts = torch.arange(requests + 1) * width
    vllm_record._forward_metadata = lambda name: (
        types.SimpleNamespace(query_start_loc=starts)
        if name == "model.layers.5.self_attn.attn" else None)
    return torch.tensor(([5] + [fill] * (width - 1)) * requests)


def _run(vllm_record, modules, causal: bool = True,
         block: tuple[int, int] | None = None) -> None:
    """Load, then two draft steps: the proposer's block (num_speculative_tokens + 1 wide,
    filled with its parallel_drafting_token_id, or `block`'s (width, fill)), embedded by
    the draft's forward, and its logits."""
    runner_module, attention_module, layers = modules
    vllm_record.install_runner(runner_module)
    vllm_record.install_attention(attention_module)
    vllm_record.install_runner(runner_module)  # installed once, whatever the imports
    runner = runner_module.GPUModelRunner()
    runner._setup_eagle3_aux_hidden_state_outputs()
    for _ in range(2):  # recorded once
        runner.drafter.model.combine_hidden_states(types.SimpleNamespace(
            dim=lambda: 2, shape=(7, 384)))
    drafter = runner.drafter
    width, fill = block or (drafter.num_speculative_tokens + 1,
                            drafter.parallel_drafting_token_id)
    for _ in range(2):  # the proposer's draft step: its block embedded, its logits
        draft = drafter.model
        draft.compute_logits(draft.model.forward(_block(vllm_record, width, fill)))
    metadata = types.SimpleNamespace(causal=causal)
    for _ in range(3):  # one line per distinct (layer, causal, window)
        for layer in layers:
            layer.self_attn.attn.impl.forward(None, None, None, None, None, metadata)
    attention_module.CPUAttentionBackendImpl(None).forward(  # a target layer's call
        None, None, None, None, None, metadata)


AUDIT = {"taps": ClauseRow(value=[2, 3, 4], source="draft config"),
         "block_size": ClauseRow(value=8, source="num_speculative_tokens + 1"),
         "mask_token_id": ClauseRow(value=2, source="draft config"),
         "draft_layers": ClauseRow(value=3), "fc_input_width": ClauseRow(value=384),
         "embeddings": ClauseRow(value=None, note="decided at load"),
         "lm_head": ClauseRow(value=None, note="decided at load")}
LAYERS = [LayerRow(index=i, window=16, causal=True) for i in range(3)]


def test_what_reached_vllms_draft_equals_the_audit(recorder) -> None:
    vllm_record, clauses, kernel = recorder
    _run(vllm_record, _vllm_shaped((2, 3, 4)))
    rows, differences = runtime_contract.check(clauses, AUDIT)
    assert differences == []
    assert rows["taps"].value == [2, 3, 4]
    assert rows["block_size"].value == 8 and rows["mask_token_id"].note is not None
    assert "combine_hidden_states" in rows["fc_input_width"].note  # as delivered, once
    assert rows["embeddings"].value == "target" and rows["lm_head"].value == "target"
    table, differences = runtime_attention.check(kernel, LAYERS)
    assert differences == [] and [(r.index, r.causal, r.window) for r in table] == \
        [(0, True, 16), (1, True, 16), (2, True, 16)]
    assert len(kernel.read_text().splitlines()) == 3  # the target's layer: not recorded


def test_a_tap_block_or_mask_difference_fails_naming_the_clause(recorder) -> None:
    vllm_record, clauses, _ = recorder
    _run(vllm_record, _vllm_shaped((1, 2, 3), k=15, mask_id=1))
    _, differences = runtime_contract.check(clauses, AUDIT)
    assert [d.split(":")[0] for d in differences] == \
        ["taps", "block_size", "block_size", "mask_token_id", "mask_token_id",
         "mask_token_id"]
    assert differences[0] == ("taps: reached the model as [1,2,3] (target "
                              "aux_hidden_state_layers); the audit says [2,3,4] "
                              "(draft config)")


def test_the_embeddings_and_head_the_draft_called_are_recorded_and_named(recorder) -> None:
    """At the draft's forward: the embed_tokens that ran in its embed_input_ids and the
    head its compute_logits handed the logits processor, by identity with the target's.
    A draft that calls its own (swapped in after load) is named where the contract says
    shared."""
    vllm_record, clauses, _ = recorder
    modules = _vllm_shaped((2, 3, 4))
    _run(vllm_record, modules)
    rows, _ = runtime_contract.check(clauses, AUDIT)
    assert "the embedding module that ran" in rows["embeddings"].note
    assert "the head its logits processor was given" in rows["lm_head"].note
    runner = modules[0].GPUModelRunner()  # a draft step that calls its own modules
    draft = runner.drafter.model
    draft.model.embed_tokens = torch.nn.Embedding(16, 4)
    shared = {**AUDIT, "embeddings": ClauseRow(value="target"),
              "lm_head": ClauseRow(value="target")}
    assert runtime_contract.check(clauses, shared)[1] == []
    draft.lm_head = torch.nn.Linear(4, 16, bias=False)
    draft.compute_logits(draft.model.forward(_block(vllm_record, 8, 2)))
    _, differences = runtime_contract.check(clauses, shared)
    assert differences == [
        "embeddings: reached the model as draft (the draft's embed_input_ids at its "
        "forward (the embedding module that ran)); the audit says target",
        "lm_head: reached the model as draft (the draft's compute_logits at its forward "
        "(the head its logits processor was given)); the audit says target"]


def test_a_window_or_causality_the_kernel_received_otherwise_is_named(recorder) -> None:
    vllm_record, _, kernel = recorder
    _run(vllm_record, _vllm_shaped((2, 3, 4), windows=(16, None, 16)), causal=False)
    _, differences = runtime_attention.check(kernel, LAYERS)
    assert [d.split(":")[0] for d in differences] == ["draft layer 0", "draft layer 1",
                                                      "draft layer 2"]
    assert "bidirectional, no window" in differences[1]


def test_nothing_is_recorded_without_the_variables(recorder, monkeypatch) -> None:
    vllm_record, clauses, kernel = recorder
    monkeypatch.delenv(vllm_record.CONTRACT_ENV)
    monkeypatch.delenv(vllm_record.ATTENTION_ENV)
    assert vllm_record.hooks() == {}
    _run(vllm_record, _vllm_shaped((2, 3, 4)))
    assert not clauses.exists() and not kernel.exists()


def test_the_hook_chains_to_the_environments_own_sitecustomize(tmp_path: Path) -> None:
    own = tmp_path / "own"
    own.mkdir()
    (own / "sitecustomize.py").write_text("import os\nos.environ['OWN_HOOK_RAN'] = '1'\n")
    code = ("import os, sys; print(os.environ.get('OWN_HOOK_RAN'), "
            "any(type(f).__name__ == 'AfterImport' for f in sys.meta_path))")
    for record, hooked in (("", "False"), (str(tmp_path / "r.jsonl"), "True")):
        env = {"PYTHONPATH": f"{FOLDER}:{own}", "HARNESS_CONTRACT_RECORD": record,
               "PATH": "/usr/bin:/bin"}
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              env=env, check=True, timeout=60)
        assert done.stdout.split() == ["1", hooked]


def test_vllms_cpu_dflash_suites_record_with_the_recorder_first_on_the_path(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.builds import REPO_ROOT
    from harness.suite.model import load_suite

    suite = load_suite(REPO_ROOT / "suites" / "tiny_dflash_vllm_cpu.toml").suite
    assert runtime_attention.wanted(suite)
    for other in ("qwen3_8b_dflash_vllm", "tiny_ngram_sglang_cpu"):  # vLLM on GPU: not read
        assert not runtime_attention.wanted(load_suite(other).suite), other
    monkeypatch.setenv("PYTHONPATH", "/the/harness")
    assert runtime_attention.recorder_path(suite, {}) == f"{FOLDER}:/the/harness"
    assert runtime_attention.recorder_path(suite, {"PYTHONPATH": "/hook"}) == f"{FOLDER}:/hook"
    sglang = load_suite(REPO_ROOT / "suites" / "tiny_dflash_sglang_cpu.toml").suite
    assert runtime_attention.recorder_path(sglang, {}) is None


class _VllmLayer(torch.nn.Module):
    """vLLM's decoder layer shape: (positions, hidden_states, residual) -> both, the
    stream hidden_states + residual growing by one per layer (hidden_states[c] is c)."""

    def forward(self, positions, hidden_states, residual):
        stream = hidden_states if residual is None else hidden_states + residual
        return torch.zeros_like(stream), stream + 1


class _VllmDecoder(torch.nn.Module):
    """vLLM's Qwen3/Llama model loop: `if idx in self.aux_hidden_state_layers:
    aux_hidden_states.append(hidden_states + residual)` before layer idx; `early` plants
    the capture one layer early at forward time (idx + 1), the configured list untouched."""

    def __init__(self, early: bool) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList(_VllmLayer() for _ in range(5))
        self.aux_hidden_state_layers: tuple[int, ...] = ()
        self.embed_tokens, self.early = object(), early

    def forward(self, tokens):
        hidden_states, residual = torch.zeros(len(tokens), 2), None
        aux = []
        for idx, layer in enumerate(self.layers):
            if (idx + 1 if self.early else idx) in self.aux_hidden_state_layers:
                aux.append(hidden_states if residual is None else hidden_states + residual)
            hidden_states, residual = layer(None, hidden_states, residual)
        return hidden_states, aux


@pytest.mark.parametrize(("early", "taps"), [(False, [2, 3, 4]), (True, [1, 2, 3])])
def test_the_captured_tensors_are_matched_to_the_layer_they_are(recorder, early,
                                                                taps) -> None:
    """Unverified against a real vLLM here (its CPU oracle runs it): each captured tensor
    is matched, at forward time, to the layer boundary it equals."""
    vllm_record, clauses, _ = recorder
    modules = _vllm_shaped((2, 3, 4))
    decoder = _VllmDecoder(early)
    runner_class = modules[0].GPUModelRunner
    original = runner_class.__init__

    def __init__(self) -> None:
        original(self)
        self.model = types.SimpleNamespace(model=decoder, lm_head=self.model.lm_head)

    runner_class.__init__ = __init__
    _run(vllm_record, modules)
    _, captured = decoder(torch.tensor([1, 2, 3]))
    assert [float(t[0, 0]) for t in captured] == taps  # what the tensors are
    rows, differences = runtime_contract.check(clauses, AUDIT)
    assert rows["taps"].value == [2, 3, 4]  # the configured list, recorded first
    assert f"{taps} (target forward: the layer boundary" in rows["taps"].note
    if early:
        assert [d.split(":")[0] for d in differences] == ["taps"]
        assert "reached the model as [1,2,3] (target forward" in differences[0]
    else:
        assert differences == []


def test_the_block_the_draft_forward_was_given_is_recorded_and_named(recorder) -> None:
    """A proposer that hands the draft forward blocks of 4 filled with 0 while its own
    num_speculative_tokens and parallel_drafting_token_id still say 8 and 2: the record
    names both clauses from the forward, not only the proposer's attributes."""
    vllm_record, clauses, _ = recorder
    _run(vllm_record, _vllm_shaped((2, 3, 4)), block=(4, 0))
    rows, differences = runtime_contract.check(clauses, AUDIT)
    assert rows["block_size"].value == 8  # the proposer's attribute, recorded first
    assert differences == [
        "block_size: reached the model as 4 (the draft forward's query block per request "
        "(query_start_loc of its attention metadata)); the audit says 8 "
        "(num_speculative_tokens + 1)",
        "mask_token_id: reached the model as 0 (the draft forward's input_ids after each "
        "request's first (the block's masked positions)); the audit says 2 (draft config)"]


def test_an_embedding_or_head_the_draft_calls_beside_the_one_it_holds_is_named(
        recorder) -> None:
    """The draft's code embeds through a module of its own making and samples with a copy
    of the target's head (values equal, identity not): vLLM chose the target's at load,
    the audit leaves the choice to vLLM, and the run names both clauses by identity."""
    vllm_record, clauses, _ = recorder
    modules = _vllm_shaped((2, 3, 4))
    runner_class = modules[0].GPUModelRunner
    original = runner_class.__init__

    def __init__(self) -> None:
        original(self)
        inner, draft = self.drafter.model.model, self.drafter.model
        private = torch.nn.Embedding.from_pretrained(inner.embed_tokens.weight.clone())
        inner.embed_input_ids = lambda ids: private(ids)
        copy = torch.nn.Linear(4, 16, bias=False)
        draft.compute_logits = lambda hidden: draft.logits_processor(copy, hidden)

    runner_class.__init__ = __init__
    _run(vllm_record, modules)
    rows, differences = runtime_contract.check(clauses, AUDIT)
    assert (rows["embeddings"].value, rows["lm_head"].value) == ("target", "target")
    assert differences == [
        "embeddings: reached the model as other (Embedding) (the draft's embed_input_ids "
        "at its forward (the embedding module that ran)); the engine chose target at load "
        "(SimpleNamespace._maybe_share_embeddings)",
        "lm_head: reached the model as other (Linear) (the draft's compute_logits at its "
        "forward (the head its logits processor was given)); the engine chose target at "
        "load (SimpleNamespace._maybe_share_lm_head)"]
