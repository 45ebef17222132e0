"""Load and check the checkpoints, and set torch's threads and kernels deliberately.

Why one module: the server process (tokenizer, configs) and every decoding worker (the
models) must read the same folders with the same checks, and each worker must pin its
threads the same way, so that a request's arithmetic never depends on the machine's core
count or on what else runs (see `configure_torch`).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reference_engine.draft_noise import DraftNoise
from reference_engine.forced import from_environment as forced_from_environment
from reference_engine.noise_drift import from_environment as noise_drift_from_environment
from reference_engine.pacing import from_environment as forward_s_from_environment
from reference_engine.policy import applied_table, apply_policy, read_draft_config

# Kernels chosen by the CPU's vector ISA round differently (AVX-512 vs AVX2 sum in other
# orders), and a greedy token can flip on a near tie. Pinning MKL's code path (conditional
# numerical reproducibility), ATen's kernel set and oneDNN's ISA is meant to keep the
# figures the same across x86-64 CPUs. Set before torch is imported; a value already in the
# environment wins.
REPRODUCIBLE_ENV = {"MKL_CBWR": "COMPATIBLE", "ATEN_CPU_CAPABILITY": "default",
                    "ONEDNN_MAX_CPU_ISA": "SSE41"}


# Installed packages a process of this engine never calls, kept out of its imports where
# transformers would import them because they are installed: scipy (transformers' models
# import scipy.optimize for object-detection losses: about a second of CPU a worker) and,
# in the server process, torch (its tokenizer returns lists, never tensors: about a
# second more). A None in sys.modules is Python's own "not importable": `import` raises
# ImportError and importlib.util.find_spec, which is how transformers asks, answers None.
WORKER_UNUSED = ("scipy",)
SERVER_UNUSED = ("torch", "scipy")


def keep_out(names: tuple[str, ...]) -> None:
    """Keep `names` out of this process's imports; a module already imported stays (the
    server of `--device cuda` has imported torch to check the device)."""
    for name in names:
        sys.modules.setdefault(name, None)  # type: ignore[arg-type]


class CheckpointError(Exception):
    """A target or draft folder that cannot be served; the message says why."""


class DeviceError(Exception):
    """The device asked for (`--device cuda`) is not usable here; the message says why.
    Never answered by a fall-back to the CPU: a run that asked for CUDA measures CUDA."""


DEVICES = ("cpu", "cuda")


def check_device(device: str) -> dict[str, Any]:
    """What `device` is here (reported in /server_info), or DeviceError. `cpu` needs nothing
    (torch is not imported); `cuda` imports torch in this process, which is safe: the
    workers are spawned, not forked, so none inherits a CUDA state."""
    if device == "cpu":
        return {"device": "cpu"}
    if device != "cuda":
        raise DeviceError(f"--device {device!r}: expected one of {', '.join(DEVICES)}")
    try:
        import torch
    except ImportError as error:
        raise DeviceError(f"--device cuda: torch cannot be imported ({error})") from None
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    where = f" (CUDA_VISIBLE_DEVICES={visible!r})" if visible is not None else ""
    if torch.version.cuda is None:
        raise DeviceError(f"--device cuda: torch {torch.__version__} is a build without CUDA; "
                          "serve this suite on a host whose torch has CUDA (the engine does "
                          "not fall back to the CPU)")
    if not torch.cuda.is_available():
        raise DeviceError(f"--device cuda: torch {torch.__version__} (CUDA {torch.version.cuda})"
                          f" sees no CUDA device{where}; the engine does not fall back to the "
                          "CPU")
    return {"device": "cuda", "cuda_device_name": torch.cuda.get_device_name(0),
            "torch_cuda": torch.version.cuda, "cuda_visible_devices": visible}


@dataclass(frozen=True)
class Options:
    """What a worker needs to build its decoder (plain data: it crosses processes)."""

    target: str
    draft: str
    policy: str = "fixed"
    block_size: int | None = None
    noise: float = 0.0
    seed: int = 0
    threads: int = 1
    interop_threads: int = 1
    device: str = "cpu"  # "cuda": the models and every tensor of a request on cuda:0


def set_reproducible_env() -> dict[str, str]:
    for key, value in REPRODUCIBLE_ENV.items():
        os.environ.setdefault(key, value)
    return {key: os.environ[key] for key in REPRODUCIBLE_ENV}


def configure_torch(threads: int, interop_threads: int) -> dict[str, int]:
    """Fixed intra- and inter-op thread counts for this process; returns what torch reports.

    One intra-op thread per worker by default: the tiny models' matrices are too small to
    gain from splitting, results stay independent of the core count, and N workers on N
    cores run in parallel instead of fighting over oversubscribed OpenMP pools.
    """
    import torch

    torch.set_num_threads(threads)
    with contextlib.suppress(RuntimeError):  # already set, or work already started
        torch.set_num_interop_threads(interop_threads)
    return {"torch_num_threads": torch.get_num_threads(),
            "torch_num_interop_threads": torch.get_num_interop_threads()}


def check_folders(target: Path, draft: Path) -> None:
    for role, folder in (("target", target), ("draft", draft)):
        if not (folder / "config.json").is_file():
            raise CheckpointError(f"{role} checkpoint {folder} has no config.json")
        if not any(folder.glob("*.safetensors")):
            raise CheckpointError(f"{role} checkpoint {folder} has no *.safetensors weights")


def context_length(target: Path) -> int:
    config = json.loads((target / "config.json").read_text())
    return int(config.get("max_position_embeddings") or 4096)


def tokenizer_class(target: Path):  # -> type[PreTrainedTokenizerBase]
    """The class `tokenizer_config.json` names, from transformers' lazy namespace (importing
    its module alone), or AutoTokenizer where it names none, or nothing transformers has as
    a tokenizer class.

    AutoTokenizer resolves a named class to this same one, but its import brings
    transformers' model and generation code, torch's distributed packages and sympy with
    it, doubling the CPU this process spends on imports at every launch, where all it
    needs is text to ids and back and the chat template
    (tests/reference_engine/test_tokenizer_as_auto_resolves.py).
    """
    import transformers

    # a malformed config, or a class whose backend is missing (transformers' lazy module
    # raises ImportError or RuntimeError): AutoTokenizer then says why
    with contextlib.suppress(OSError, ValueError, AttributeError, ImportError, RuntimeError):
        named = json.loads((target / "tokenizer_config.json").read_text()).get("tokenizer_class")
        if isinstance(named, str) and named.isidentifier():
            found = getattr(transformers, named, None)
            if isinstance(found, type) and issubclass(found,
                                                      transformers.PreTrainedTokenizerBase):
                return found
    return transformers.AutoTokenizer


def load_tokenizer(target: Path):  # -> PreTrainedTokenizerBase
    try:
        return tokenizer_class(target).from_pretrained(target)
    except Exception as error:
        raise CheckpointError(f"cannot load the tokenizer of {target}: "
                              f"{type(error).__name__}: {error}") from error


def load_decoder(options: Options) -> tuple[Any, list[dict[str, Any]]]:
    """(SpeculativeDecoder, the attention table read back from the draft's modules)."""
    import torch
    from dflash.model import DFlashDraftModel
    from transformers import AutoModelForCausalLM

    from reference_engine.decoding import SpeculativeDecoder

    target_dir, draft_dir = Path(options.target), Path(options.draft)
    check_folders(target_dir, draft_dir)
    tokenizer = load_tokenizer(target_dir)
    try:
        target = AutoModelForCausalLM.from_pretrained(target_dir, dtype=torch.float32).eval()
        draft = DFlashDraftModel.from_pretrained(draft_dir, dtype=torch.float32).eval()
        draft_config = read_draft_config(draft_dir)
    except Exception as error:  # any loader failure is a bad checkpoint, said in one line
        raise CheckpointError(f"cannot load checkpoints: {type(error).__name__}: {error}") \
            from error
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
    if options.device != "cpu":
        check_device(options.device)
        target, draft = target.to(options.device), draft.to(options.device)
    apply_policy(draft, draft_config, options.policy)
    block_size = options.block_size or draft.block_size
    decoder = SpeculativeDecoder(target, draft, tokenizer, block_size,
                                 DraftNoise(options.noise, options.seed,
                                            noise_drift_from_environment(os.environ)),
                                 forced_from_environment(os.environ),
                                 forward_s_from_environment(os.environ))
    return decoder, applied_table(draft)
