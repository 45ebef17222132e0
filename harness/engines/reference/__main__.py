"""`python -m harness.engines.reference`: launch the CPU reference engine's server.

Command line modelled on `sglang.launch_server` (target, draft, host, port), plus the
reference engine's own knobs: the SGLang causality behaviour to replay and the draft noise.
Exits 2 with a one-line message on unusable checkpoints or arguments, so the harness can
report the cause instead of a traceback.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path
from typing import Any

from harness import __version__

EXIT_BAD_INPUT = 2
# The API this server imitates; the local label says it is not SGLang itself.
VERSION = "0.5.23+reference"


class CheckpointError(Exception):
    """A target or draft folder that cannot be served; the message says why."""


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m harness.engines.reference",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--target", type=Path, required=True, help="target checkpoint folder")
    parser.add_argument("--draft", type=Path, required=True, help="DFlash draft folder")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--attention-policy", choices=("fixed", "legacy", "regressed"),
                        default="fixed", help="SGLang causality behaviour to replay")
    parser.add_argument("--block-size", type=int, default=None,
                        help="speculative block size (default: the draft's)")
    parser.add_argument("--draft-noise", type=float, default=0.0,
                        help="probability that each draft token is spoiled (0..1)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    parser.add_argument("--log-level", default="info")
    args = parser.parse_args(argv)
    if not 0.0 <= args.draft_noise <= 1.0:
        parser.error("--draft-noise must be within [0, 1]")
    if args.block_size is not None and args.block_size < 1:
        parser.error("--block-size must be at least 1")
    return args


def load(args: argparse.Namespace):  # -> (Engine)
    """Load and check both checkpoints, apply the policy, build the engine."""
    for role, folder in (("target", args.target), ("draft", args.draft)):
        if not (folder / "config.json").is_file():
            raise CheckpointError(f"{role} checkpoint {folder} has no config.json")
        if not any(folder.glob("*.safetensors")):
            raise CheckpointError(f"{role} checkpoint {folder} has no *.safetensors weights")
    import torch
    from dflash.model import DFlashDraftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from harness.engines.reference.decoding import DraftNoise, SpeculativeDecoder
    from harness.engines.reference.policy import applied_table, apply_policy, read_draft_config
    from harness.engines.reference.server import Engine

    if args.threads:
        torch.set_num_threads(args.threads)
    try:
        tokenizer = AutoTokenizer.from_pretrained(args.target)
        target = AutoModelForCausalLM.from_pretrained(args.target, dtype=torch.float32).eval()
        draft = DFlashDraftModel.from_pretrained(args.draft, dtype=torch.float32).eval()
        draft_config = read_draft_config(args.draft)
    except Exception as error:  # any loader failure is a bad checkpoint, said in one line
        reason = f"{type(error).__name__}: {error}"
        raise CheckpointError(f"cannot load checkpoints: {reason}") from error
    if draft.config.hidden_size != target.config.hidden_size:
        raise CheckpointError(
            f"draft hidden_size {draft.config.hidden_size} != target "
            f"{target.config.hidden_size}: the draft reads the target's hidden states")
    if draft.mask_token_id is None or not 0 <= draft.mask_token_id < target.config.vocab_size:
        raise CheckpointError(f"draft mask_token_id {draft.mask_token_id!r} is not a target token")
    layers = target.config.num_hidden_layers
    if any(not 0 <= index < layers for index in draft.target_layer_ids):
        raise CheckpointError(f"draft target_layer_ids {draft.target_layer_ids} outside the "
                              f"target's {layers} layers")
    table = apply_policy(draft, draft_config, args.attention_policy)
    block_size = args.block_size or draft.block_size
    decoder = SpeculativeDecoder(target, draft, tokenizer, block_size,
                                 DraftNoise(args.draft_noise, args.seed))
    settings = server_args(args, block_size, table)
    settings["attention_applied"] = applied_table(draft)
    return Engine(decoder=decoder, server_args=settings, seed=args.seed)


def server_args(args: argparse.Namespace, block_size: int, table: list) -> dict[str, Any]:
    """SGLang's server args (the keys the harness reads) plus the reference engine's own."""
    target, draft = str(args.target), str(args.draft)
    return {
        "model_path": target, "tokenizer_path": target, "served_model_name": target,
        "host": args.host, "port": args.port, "device": "cpu", "tp_size": 1, "dp_size": 1,
        "random_seed": args.seed,
        "speculative_algorithm": "DFLASH",
        "speculative_draft_model_path": draft,
        "speculative_num_draft_tokens": block_size,
        "speculative_dflash_block_size": block_size,
        "speculative_num_steps": 1, "speculative_eagle_topk": 1,
        "version": VERSION,
        "engine": "reference", "harness_version": __version__,
        "attention_policy": args.attention_policy,
        "attention_layers": [entry.to_dict() for entry in table],
        "draft_noise": args.draft_noise,
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s reference %(levelname)s %(message)s")
    log = logging.getLogger("harness.engines.reference")
    started = time.perf_counter()
    try:
        engine = load(args)
    except CheckpointError as error:
        print(f"reference engine: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    from harness.engines.reference.server import make_server

    engine.start()
    try:
        server = make_server(engine, args.host, args.port)
    except OSError as error:
        print(f"reference engine: cannot bind {args.host}:{args.port}: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    log.info("policy %s: %s", args.attention_policy, engine.server_args["attention_layers"])
    log.info("loaded in %.1f s; serving on http://%s:%d", time.perf_counter() - started,
             args.host, args.port)
    log.info("The server is fired up and ready to roll!")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
