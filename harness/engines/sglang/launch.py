"""SGLang's launch line, with the flags SGLang 0.5.23 defines.

Flag names are `--` + the field names in `sglang/srt/arg_groups/fields/*.py`
(`model.py`, `spec.py`, `parallel.py`, `device.py`, `serving.py`), aliases as those
fields declare them; DFLASH checks live in `sglang/srt/arg_groups/speculative_hook.py`.
0.5.23 recommends `sglang serve`, and still accepts `python -m sglang.launch_server`,
which every release since 0.4 has: the harness uses the latter so one line serves
every build it may be asked to test.
"""

from __future__ import annotations

from harness.engine_kinds import ENGINES
from harness.engines.flags import check_suite_flags
from harness.engines.interface import Placement
from harness.errors import BadInput
from harness.suite.checkpoints import Models, resolve_models
from harness.suite.model import Suite
from harness.suite.serving import SGLangEngine

LAUNCH_MODULE = "sglang.launch_server"

# Every flag the harness may set, with SGLang 0.5.23's aliases of the same fields:
# `--model` (fields/model.py), `--tensor-parallel-size` (fields/parallel.py),
# `--speculative-draft-model` (fields/spec.py); and `--config`, a YAML file whose keys
# would override any of them. Prefixes are refused too (harness.engines.flags).
RESERVED_FLAGS = frozenset({
    "--host", "--port", "--config",
    "--model-path", "--model", "--revision",
    "--tp-size", "--tensor-parallel-size",
    "--random-seed",
    "--speculative-algorithm",
    "--speculative-draft-model-path", "--speculative-draft-model",
    "--speculative-draft-model-revision",
    "--speculative-num-draft-tokens", "--speculative-dflash-block-size",
    "--speculative-num-steps", "--speculative-eagle-topk",
    "--speculative-draft-attention-backend",
    # topology (fields/parallel.py, fields/disagg.py) and their aliases
    "--dp-size", "--data-parallel-size", "--enable-dp-attention",
    "--attn-dp-size", "--attention-data-parallel-size",
    "--pp-size", "--pipeline-parallel-size",
    "--nnodes", "--node-rank", "--dist-init-addr", "--nccl-init-addr",
    "--disaggregation-mode", "--disaggregation-transfer-backend",
    "--disaggregation-bootstrap-port",
})
# The flags that turn speculation on, all set by the harness alone (reserved above):
# without them SGLang serves the target alone ([speedup]).
SPECULATIVE_FLAGS = frozenset(flag for flag in RESERVED_FLAGS
                              if flag.startswith("--speculative-"))
# its secret flags are data every folder reads (harness/engine_kinds.py)
SECRET_FLAGS = ENGINES["sglang"].secret_flags
RESERVED_WHY = ("use the suite's own field (target/draft model and revision, [speculative], "
                "[topology]: tp_size, dp_size, dp_attention, pp_size, nnodes, disaggregation; "
                "workload.seed); host is always 127.0.0.1 and the port is "
                "chosen free")


def check_flags(suite: Suite) -> None:
    """BadInput when extra_args set an owned flag or abbreviate a secret one."""
    check_suite_flags(suite.name, suite.engine.extra_args, RESERVED_FLAGS, SECRET_FLAGS,
                      RESERVED_WHY)


def topology_args(suite: Suite, placement: Placement | None = None) -> list[str]:
    """The parallel flags of one server process of the suite's topology (only those that
    differ from SGLang's defaults, so a one-process suite's line is as it always was).

    Data-parallel attention is `--dp-size N --enable-dp-attention`: every release to 0.5.23
    reads it (0.5.23 resolves it to `attn_dp_size = N` with a deprecation warning,
    arg_groups/parallel_hook.py `_handle_deprecated_dp_attention`; its new spelling
    `--attn-dp-size` is not in earlier releases). Several nodes: SGLang's `--nnodes`,
    `--node-rank` and `--dist-init-addr` (node 0's rendezvous); a prefill/decode split:
    `--disaggregation-mode`, the transfer backend and the prefill side's bootstrap port.
    """
    topology = suite.topology
    placement = placement or Placement(nnodes=topology.nnodes)
    side = topology.sides.get(placement.side)
    if side is None:
        raise BadInput(f"suite {suite.name}: the topology has no {placement.side} side "
                       f"(it has {', '.join(topology.sides)})")
    args = ["--tp-size", str(side.tp_size)]
    if side.dp_size > 1:
        args += ["--dp-size", str(side.dp_size)]
    if side.dp_attention:
        args += ["--enable-dp-attention"]
    if side.pp_size > 1:
        args += ["--pp-size", str(side.pp_size)]
    if placement.nnodes > 1:
        if not placement.dist_init_addr:
            raise BadInput(f"suite {suite.name}: {placement.nnodes} nodes need node 0's "
                           "address (--dist-init-addr host:port)")
        args += ["--nnodes", str(placement.nnodes), "--node-rank", str(placement.node_rank),
                 "--dist-init-addr", placement.dist_init_addr]
    split = topology.disaggregation
    if split is not None:
        args += ["--disaggregation-mode", placement.side,
                 "--disaggregation-transfer-backend", split.transfer_backend]
        if placement.bootstrap_port is not None:
            args += ["--disaggregation-bootstrap-port", str(placement.bootstrap_port)]
    return args


def launch_command(suite: Suite, python: str, host: str, port: int,
                   models: Models | None = None,
                   placement: Placement | None = None) -> list[str]:
    """`python -m sglang.launch_server ...` for this suite (extra_args last, checked); with
    a placement, the line of that node or side of its topology."""
    engine = suite.engine
    if not isinstance(engine, SGLangEngine):
        raise BadInput(f"suite {suite.name}: not an sglang suite")
    check_flags(suite)
    models = models or resolve_models(suite)
    if models is None:  # only a reference suite names no models
        raise BadInput(f"suite {suite.name}: names no target model")
    spec = suite.speculative
    command = [python, "-m", LAUNCH_MODULE, "--model-path", models.target]
    if models.target_revision:
        command += ["--revision", models.target_revision]
    command += ["--speculative-algorithm", spec.algorithm]
    if models.draft is not None:  # NGRAM has none; SGLang would load the path's config
        command += ["--speculative-draft-model-path", models.draft]
    if models.draft is not None and models.draft_revision:
        command += ["--speculative-draft-model-revision", models.draft_revision]
    # DFLASH aliases: pass the one the suite names (SGLang rejects them if they differ).
    if spec.num_draft_tokens is not None:
        command += ["--speculative-num-draft-tokens", str(spec.num_draft_tokens)]
    elif spec.block_size is not None:
        command += ["--speculative-dflash-block-size", str(spec.block_size)]
    if spec.num_steps is not None:
        command += ["--speculative-num-steps", str(spec.num_steps)]
    if spec.eagle_topk is not None:
        command += ["--speculative-eagle-topk", str(spec.eagle_topk)]
    if spec.draft_attention_backend:
        command += ["--speculative-draft-attention-backend", spec.draft_attention_backend]
    command += [
        *topology_args(suite, placement),
        "--random-seed", str(suite.workload.seed),
        "--host", host,
        "--port", str(port),
    ]
    return command + list(engine.extra_args)


def flag_value(args: list[str], flag: str) -> str | None:
    """The value a command line gives `flag` (`--flag V` or `--flag=V`; the last wins)."""
    value = None
    for i, arg in enumerate(args):
        if arg == flag and i + 1 < len(args):
            value = args[i + 1]
        elif arg.startswith(flag + "="):
            value = arg.split("=", 1)[1]
    return value


def api_key(suite: Suite, admin: bool = False) -> str | None:
    """The key the harness must send (`Authorization: Bearer ...`) when a suite's
    extra_args give the server `--api-key` / `--admin-api-key`.

    SGLang 0.5.23 (`sglang/srt/utils/auth.py`): ordinary routes (/generate, /server_info)
    need the api key when one is set; admin routes (/flush_cache) need the admin key when
    one is set, else the api key; health and readiness routes need none.
    """
    args = list(suite.engine.extra_args)
    key = flag_value(args, "--api-key")
    if admin:
        return flag_value(args, "--admin-api-key") or key
    return key
