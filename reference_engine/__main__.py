"""`python -m reference_engine`: launch the CPU reference engine's server.

Command line modelled on `sglang.launch_server` (target, draft, host, port), plus the
reference engine's own knobs: the SGLang causality behaviour to replay and the draft noise.
Exits 2 with a one-line message on unusable checkpoints or arguments, so the harness can
report the cause instead of a traceback.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from harness import __version__
from harness.errors import ExitCode
from harness.suite.attention import resolve_layers
from reference_engine.checkpoints import served_weights_sha256
from reference_engine.engine import Engine, EngineFailure
from reference_engine.loading import (
    DEVICES,
    SERVER_UNUSED,
    CheckpointError,
    DeviceError,
    Options,
    check_device,
    check_folders,
    keep_out,
    load_tokenizer,
    set_reproducible_env,
)
from reference_engine.policy import read_draft_config
from reference_engine.routes import routes
from reference_engine.web import make_server

EXIT_BAD_INPUT = ExitCode.BAD_INPUT
# The API this server imitates; the local label says it is not SGLang itself.
VERSION = "0.5.23+reference"


WORKERS_ENV = "HARNESS_REFERENCE_WORKERS"


def default_workers() -> int:
    """`$HARNESS_REFERENCE_WORKERS`, else one decoding worker per usable core, at most 4
    (a shared 2-core box gets 2). Figures do not depend on it: each worker decodes one
    request at a time with the same arithmetic (docs/reference-engine.md)."""
    if os.environ.get(WORKERS_ENV, "").strip().isdigit() and int(os.environ[WORKERS_ENV]) > 0:
        return int(os.environ[WORKERS_ENV])
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, min(4, cores))


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m reference_engine",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--target", type=Path, required=True, help="target checkpoint folder")
    parser.add_argument("--draft", type=Path, required=True, help="DFlash draft folder")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--attention-policy", choices=("fixed", "legacy", "regressed"),
                        default="fixed", help="SGLang causality behaviour to replay")
    parser.add_argument("--block-size", type=int, default=None,
                        help="speculative block size (default: the draft's)")
    parser.add_argument("--no-speculation", action="store_true",
                        help="serve the target alone: one target token a step, no draft "
                             "(the target-alone run of a suite's [speedup])")
    parser.add_argument("--draft-noise", type=float, default=0.0,
                        help="probability that each draft token is spoiled (0..1)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dp-size", type=int, default=1,
                        help="data-parallel ranks, each with its own counters (/server_info "
                             "internal_states) and named in each response's meta_info")
    parser.add_argument("--workers", type=int, default=None,
                        help="decoding worker processes (default: usable cores, at most 4)")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch intra-op threads per worker (default 1)")
    parser.add_argument("--interop-threads", type=int, default=1,
                        help="torch inter-op threads per worker (default 1)")
    parser.add_argument("--context-length", type=int, default=None,
                        help="the model's context length (default: its config's)")
    parser.add_argument("--served-model-name", default=None,
                        help="model name in the OpenAI API (default: the target path)")
    parser.add_argument("--api-key", default=None,
                        help="require `Authorization: Bearer KEY` (health probes stay open)")
    parser.add_argument("--admin-api-key", default=None,
                        help="key for admin routes (/flush_cache), as SGLang's")
    parser.add_argument("--device", choices=DEVICES, default="cpu",
                        help="where the models run (default cpu); cuda: the first visible "
                             "CUDA device, refused (exit 2) when torch has none, never a "
                             "fall-back to the CPU")
    parser.add_argument("--log-level", default="info")
    args = parser.parse_args(argv)
    if not 0.0 <= args.draft_noise <= 1.0:
        parser.error("--draft-noise must be within [0, 1]")
    for flag in ("block_size", "workers", "threads", "interop_threads", "context_length",
                 "dp_size"):
        value = getattr(args, flag)
        if value is not None and value < 1:
            parser.error(f"--{flag.replace('_', '-')} must be at least 1")
    if args.no_speculation and args.block_size not in (None, 1):
        parser.error("--no-speculation decodes one token a step: it takes no --block-size")
    if args.no_speculation:
        args.block_size = 1  # the decoder's plain path: no draft step, one target token
    args.workers = args.workers or default_workers()
    return args


def options_of(args: argparse.Namespace) -> Options:
    return Options(target=str(args.target), draft=str(args.draft), policy=args.attention_policy,
                   block_size=args.block_size, noise=args.draft_noise, seed=args.seed,
                   threads=args.threads, interop_threads=args.interop_threads,
                   device=args.device)


def server_args(args: argparse.Namespace, block_size: int, target_config: dict[str, Any],
                draft_config: dict[str, Any], reproducible: dict[str, str]) -> dict[str, Any]:
    """SGLang's server args (the keys the harness reads) plus the reference engine's own.

    Never the API keys: /server_info is readable by anyone holding the normal key.
    """
    target, draft = str(args.target), str(args.draft)
    table = resolve_layers(draft_config, args.attention_policy)
    return {
        "model_path": target, "tokenizer_path": target,
        "served_model_name": args.served_model_name or target,
        "host": args.host, "port": args.port, "device": args.device, "tp_size": 1,
        "dp_size": args.dp_size,
        "random_seed": args.seed, "context_length": args.context_length or
        int(target_config.get("max_position_embeddings") or 4096),
        "vocab_size": int(target_config["vocab_size"]),
        "model_type": target_config.get("model_type"),
        "architectures": target_config.get("architectures"),
        # SGLang's server args without speculation: the algorithm and its settings unset
        **_speculative_args(args, draft, block_size),
        "version": VERSION,
        "engine": "reference", "harness_version": __version__,
        "attention_policy": args.attention_policy,
        "attention_layers": [entry.to_dict() for entry in table],
        "draft_noise": args.draft_noise,
        "api_key_required": bool(args.api_key),
        "workers": args.workers, "reproducible_env": reproducible,
        "weights_sha256": served_weights_sha256(args.target, args.draft),
    }


def _speculative_args(args: argparse.Namespace, draft: str, block_size: int
                      ) -> dict[str, Any]:
    values: dict[str, Any] = {
        "speculative_algorithm": "DFLASH", "speculative_draft_model_path": draft,
        "speculative_num_draft_tokens": block_size,
        "speculative_dflash_block_size": block_size,
        "speculative_num_steps": 1, "speculative_eagle_topk": 1}
    if args.no_speculation:
        return dict.fromkeys(values)
    return values


def load(args: argparse.Namespace):  # -> Engine (started)
    """Check the folders, start the workers (each loads the models), build the engine."""
    check_folders(args.target, args.draft)
    device = check_device(args.device)  # before any worker starts: no silent CPU fall-back
    try:
        target_config = json.loads((args.target / "config.json").read_text())
        draft_config = read_draft_config(args.draft)
    except (OSError, ValueError) as error:
        raise CheckpointError(f"cannot read a config.json: {error}") from error
    reproducible = set_reproducible_env()
    block_size = args.block_size or int(draft_config.get("block_size") or 16)
    settings = server_args(args, block_size, target_config, draft_config, reproducible)
    settings["device_info"] = device
    engine = Engine(options_of(args), args.workers, settings, dp_size=args.dp_size)
    # The workers start first: their imports and weights load while this process loads
    # its tokenizer (the start-up is about a second shorter with a core to spare).
    engine.launch_workers()
    keep_out(SERVER_UNUSED)  # after the workers are spawned: each is a fresh interpreter
    try:
        engine.tokenizer = load_tokenizer(args.target)
        engine.wait_ready()
    except CheckpointError:
        engine.stop()
        raise
    except EngineFailure as error:
        raise CheckpointError(str(error)) from error
    settings["attention_applied"] = engine.worker_info["attention_applied"]
    settings["torch_num_threads"] = engine.worker_info["torch_num_threads"]
    settings["torch_num_interop_threads"] = engine.worker_info["torch_num_interop_threads"]
    return engine


def _raise_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s reference %(levelname)s %(message)s")
    log = logging.getLogger("reference_engine")
    started = time.perf_counter()
    try:
        engine = load(args)
    except (CheckpointError, DeviceError) as error:
        print(f"reference engine: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT

    try:
        server = make_server(engine, args.host, args.port, routes(), api_key=args.api_key,
                             admin_api_key=args.admin_api_key)
    except OSError as error:
        engine.stop()
        print(f"reference engine: cannot bind {args.host}:{args.port}: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    log.info("policy %s: %s", args.attention_policy, engine.server_args["attention_layers"])
    log.info("device %s", engine.server_args["device_info"])
    log.info("%d workers, %d intra-op / %d inter-op torch threads each", args.workers,
             args.threads, args.interop_threads)
    log.info("loaded in %.1f s; serving on http://%s:%d", time.perf_counter() - started,
             args.host, args.port)
    log.info("The server is fired up and ready to roll!")
    # SIGTERM (how the harness stops servers) ends like Ctrl-C: workers stopped, queues
    # released, no leaked semaphores reported by multiprocessing's tracker.
    signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        engine.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
