"""The sgl_kernel stand-in's ops against plain torch, run by the engine's interpreter."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.sglang_cpu.conftest import STAND_IN

CHECKS = ["assign_req_to_token_pool", "assign_extend_cache_locs",
          "assign_draft_cache_locs_contiguous", "build_draft_decode_metadata",
          "copy_all_layer_kv_cache", "fill_bonus_tokens", "fill_accept_out_cache_loc",
          "verify_tree_greedy_chain", "verify_tree_greedy_siblings",
          "reconstruct_indices_from_tree_mask", "build_tree_chain_matches_reconstruct",
          "decode_attention", "extend_attention_causal", "extend_attention_tree_mask",
          "extend_attention_sliding_causal", "extend_attention_sliding_bidirectional",
          "decode_attention_sliding", "records_what_it_received",
          "refuses_what_it_does_not_implement", "fused_sigmoid_mul",
          "torchvision_placeholder_in_a_type_union"]


@pytest.fixture(scope="module")
def results(sglang_cpu) -> dict[str, str]:
    done = subprocess.run([sglang_cpu.python, str(STAND_IN / "kernel_checks.py")],
                          capture_output=True, text=True, timeout=600, check=False)
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_every_check_is_listed(results: dict[str, str]) -> None:
    assert sorted(results) == sorted(CHECKS)


@pytest.mark.parametrize("name", CHECKS)
def test_op_matches_plain_torch(results: dict[str, str], name: str) -> None:
    assert results[name] == "ok", results[name]


def test_amx_probe_answers_yes_only_with_the_stand_in(sglang_cpu) -> None:
    """SGLang's own fallback keeps intel_amx with the stand-in's answer, and switches to
    torch_native without it (this CPU has no AMX)."""
    script = ("import types, json\n"
              "from sglang.srt.runtime_context import get_platform\n"
              "from sglang.srt.arg_groups.overrides import "
              "_attention_backend_platform_fallbacks as f\n"
              "view = types.SimpleNamespace(attention_backend='intel_amx', device='cpu')\n"
              "print(json.dumps([get_platform().has_amx, f(view)]))\n")
    answers = {}
    for with_stand_in in (True, False):
        env = {"SGLANG_USE_CPU_ENGINE": "1", "PATH": "/usr/bin:/bin"}
        if with_stand_in:
            env["PYTHONPATH"] = str(STAND_IN)
        done = subprocess.run([sglang_cpu.python, "-c", script], capture_output=True,
                              text=True, timeout=600, env=env, check=False)
        assert done.returncode == 0, done.stderr[-2000:]
        answers[with_stand_in] = json.loads(done.stdout.strip().splitlines()[-1])
    assert answers[True] == [True, {}]
    assert answers[False] == [False, {"attention_backend": "torch_native"}]
