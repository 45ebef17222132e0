"""CPU suites derived from GPU suites: the GPU suite's own launch line, on the seed's
miniatures, through real SGLang on a CPU.

A derived suite is written by code, never by hand, so it cannot drift from its source:
`derive` takes the GPU suite's document and keeps its launch line (every `extra_args`
flag in its order, the speculative settings, the default build, the paired gate's
settings) with exactly two kinds of change:

- the model paths: the miniature's shipped target and draft;
- the CPU device flags (`CPU_REPLACED`, `CPU_ADDED`): the attention backends become
  `intel_amx` (SGLang's CPU backend; the draft's too), `--mem-fraction-static` a CPU
  share, the tensor parallelism 1 (no GPUs), and SGLang's CPU switches are added
  (`--device cpu`, no overlap scheduling, no CUDA graphs, the torch sampler, no grammar
  backend), plus a KV pool bound when the GPU line states none,
  `--decode-log-interval 1` (so `/server_info` covers exactly the measured window) and
  `--sleep-on-idle` (an idle scheduler waits on its sockets instead of polling them with
  a whole core).

What a line cannot carry is the variant's own (`CpuVariant`): the workload a model this
small answers (0 shots, short answers), the floor under its measured CI, the baselines
measured here, the draft's expected attention with the miniature's window. The CPU
engine's stand-ins and per-release test patch are the CPU DFLASH suites' (docs/
sglang-on-cpu.md).

`python -m harness.suite.cpu_variants` rewrites the derived suites in `suites/`;
`--check` exits 1 naming each one whose file differs from its derivation (a test runs it).
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomli_w

from harness.files import SUITES_DIR

REPO = SUITES_DIR.parent
SEED_DIR = "reference_engine/seed"

# Flag -> its CPU value, wherever the GPU line has it (everything else is kept as written).
CPU_REPLACED: dict[str, str] = {
    "--attention-backend": "intel_amx",
    "--mem-fraction-static": "0.4",
}
# SGLang's CPU switches, appended after the GPU line's own flags.
CPU_ADDED: tuple[str, ...] = (
    "--device", "cpu", "--disable-overlap-schedule", "--disable-cuda-graph",
    "--sampling-backend", "pytorch", "--grammar-backend", "none", "--decode-log-interval", "1",
    "--sleep-on-idle",
)
# A KV pool bound for a line that states none (a GPU line sizes it from GPU memory).
CPU_DEFAULT_POOL = ("--max-total-tokens", "4096")
CPU_DRAFT_BACKEND = "intel_amx"
CPU_ENGINE = {
    "launch_timeout_s": 900,
    "stand_ins": ["tests/cpu_stand_ins"],
    "test_patches": ["tests/cpu_patches/sglang-{version}-dflash-cpu.diff"],
}


@dataclass(frozen=True)
class CpuVariant:
    """What a derived suite states beyond its source's launch line."""

    name: str
    source: str  # the GPU suite's file stem in suites/
    pair: str  # the miniature: reference_engine/seed/<pair>/
    workload: dict[str, object]
    floor: float
    floor_note: str
    # the draft's layers, causal or not, when the source states none (else the source's)
    causal: tuple[bool, ...] | None = None
    baselines: tuple[dict[str, object], ...] = ()
    notes: tuple[str, ...] = ()
    extra: dict[str, object] = field(default_factory=dict)


def cpu_extra_args(args: Sequence[str]) -> list[str]:
    """The GPU line's `extra_args` with the CPU device flags swapped in."""
    out: list[str] = []
    index = 0
    while index < len(args):
        flag = args[index]
        if flag in CPU_REPLACED:
            out += [flag, CPU_REPLACED[flag]]
            index += 2
            continue
        out.append(flag)
        index += 1
    if "--attention-backend" not in out:
        out += ["--attention-backend", CPU_REPLACED["--attention-backend"]]
    if "--max-total-tokens" not in out:
        out += list(CPU_DEFAULT_POOL)
    return out + list(CPU_ADDED)


def _draft_window(pair: str, repo: Path) -> int:
    config = json.loads((repo / SEED_DIR / pair / "draft" / "config.json").read_text())
    return int(config["sliding_window"])


def _draft_layer_types(pair: str, repo: Path) -> list[str]:
    config = json.loads((repo / SEED_DIR / pair / "draft" / "config.json").read_text())
    return list(config["layer_types"])


# A GPU source suite's TOML document, read raw (Any: its tables are read as the shipped
# file has them; the derived document is validated as a suite when it is loaded).
SourceDocument = Mapping[str, Any]


def expected_layers(source: SourceDocument, variant: CpuVariant,
                    repo: Path = REPO) -> list[dict[str, object]]:
    """The source's expected attention (or the variant's), with the miniature's window."""
    stated = source.get("draft", {}).get("expected_layers")
    causal = (list(variant.causal) if variant.causal is not None
              else [bool(layer["causal"]) for layer in stated or []])
    types = _draft_layer_types(variant.pair, repo)
    if len(causal) != len(types):
        raise ValueError(f"{variant.name}: {len(causal)} expected layers for a "
                         f"{len(types)}-layer draft ({variant.pair})")
    window = _draft_window(variant.pair, repo)
    return [{"causal": c, "window": window} if kind == "sliding_attention" else {"causal": c}
            for c, kind in zip(causal, types, strict=True)]


def derive(source: SourceDocument, variant: CpuVariant,
           repo: Path = REPO) -> dict[str, object]:
    """The derived suite's document from its GPU source's."""
    engine = dict(source["engine"])
    engine.update(CPU_ENGINE)
    engine["extra_args"] = cpu_extra_args(source["engine"].get("extra_args", []))
    speculative = dict(source.get("speculative", {}))
    speculative["draft_attention_backend"] = CPU_DRAFT_BACKEND
    document: dict[str, object] = {
        "name": variant.name,
        "description": (f"{source['name']} on real SGLang's CPU path: its launch line on "
                        f"the {variant.pair} miniature (reference_engine/seed)"),
        "engine": engine,
        "target": {"model": f"{SEED_DIR}/{variant.pair}/target"},
        "draft": {"model": f"{SEED_DIR}/{variant.pair}/draft",
                  "expected_layers": expected_layers(source, variant, repo)},
        "speculative": speculative,
        "topology": {"gpus": 0},
        "workload": dict(variant.workload),
        "floors": {"metric": source["floors"]["metric"], "accept_length": variant.floor},
    }
    if variant.baselines:
        document["baselines"] = [dict(b) for b in variant.baselines]
    if "gate" in source:
        gate = {key: value for key, value in source["gate"].items() if key != "calibration"}
        document["gate"] = gate
    document.update(variant.extra)
    return document


def render(document: Mapping[str, object], variant: CpuVariant) -> str:
    """The suite file: a header saying where it comes from, then the document."""
    header = [
        f"# DERIVED from suites/{variant.source}.toml by harness/suite/cpu_variants.py:",
        "# do not edit; change the source or the variant and run",
        "# `python -m harness.suite.cpu_variants` (a test fails while they differ).",
        f"# The launch line is {variant.source}'s with the model paths and the CPU device",
        "# flags swapped (SGLang 0.5.23's DFLASH worker on CPU: the kernel stand-ins and",
        "# the per-release test patch, docs/sglang-on-cpu.md; the miniature,",
        "# docs/seed-models.md).",
        # the floor's note names its calibration and figures: wrapped, as a comment
        *(f"# {line}" for line in textwrap.wrap(
            f"Floor: {variant.floor_note}", 88, break_long_words=False, break_on_hyphens=False)),
        *(f"# {line}" for line in variant.notes),
    ]
    return "\n".join(header) + "\n\n" + tomli_w.dumps(dict(document))


# The seed's two GPU suites, on their miniatures. Workload: 0-shot GSM8K (the miniatures
# saw 0- to 2-shot windows of 128 tokens), answers of at most 96 tokens, 4 at a time.
_WORKLOAD = {"kind": "gsm8k", "shots": 0, "questions": 40, "max_tokens": 96,
             "concurrency": 4, "temperature": 0.0, "seed": 0, "warmup_requests": 2}

VARIANTS: tuple[CpuVariant, ...] = (
    CpuVariant(
        name="gemma4_dflash_sglang_cpu", source="gemma4_dflash_31b", pair="gemma4",
        workload=_WORKLOAD, floor=3.455,
        floor_note="server_avg, `harness calibrate gemma4_dflash_sglang_cpu --runs 3 "
                   "--sglang sglang==0.5.23`'s suggestion on this engine (calibration "
                   "4bd39ff2: 4.0796 three times, 339 verify steps each, run-to-run sd 0, "
                   "within-run se 0.3289; floor = mean - z(0.95) * within-run se * "
                   "sqrt(1 + 1/3) = 3.455, a prediction bound for the next run), 15.3% "
                   "under the mean. The seed's regression (PR #34524 reverted, measured "
                   "with --no-enforce-contract: 2.9317, 95% CI 2.597-3.341, -28.1%) fails "
                   "by the floor too, besides the contract (before the launch) and the "
                   "paired gate; a drop under 15% is left to the paired gate.",
    ),
    CpuVariant(
        name="muse_glimmer_dflash_sglang_cpu", source="muse_glimmer_dflash_gsm8k",
        pair="muse_glimmer", workload=_WORKLOAD, floor=3.796,
        floor_note="server_avg, `harness calibrate muse_glimmer_dflash_sglang_cpu --runs 3 "
                   "--sglang sglang==0.5.23`'s suggestion on this engine (calibration "
                   "29b2d44c: 3.9781 three times, 320 verify steps each, run-to-run sd 0, "
                   "within-run se 0.0955; floor = mean - z(0.95) * within-run se * "
                   "sqrt(1 + 1/3) = 3.796, a prediction bound for the next run), 4.6% "
                   "under the mean: a larger drop fails by the floor. PR #34524 reverted "
                   "changes nothing here (every layer bidirectional either way): no planted "
                   "defect of this pair to set against the floor.",
        # MuseGlimmerAssistantConfig states is_causal = False: every layer bidirectional,
        # as released and with PR #34524 reverted alike.
        causal=(False,) * 5,
    ),
)


def variant_named(name: str) -> CpuVariant:
    for variant in VARIANTS:
        if variant.name == name:
            return variant
    raise KeyError(name)


def derived_text(variant: CpuVariant, repo: Path = REPO) -> str:
    source = tomllib.loads((repo / "suites" / f"{variant.source}.toml").read_text())
    return render(derive(source, variant, repo), variant)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 naming each derived suite that differs")
    args = parser.parse_args(argv)
    stale: list[str] = []
    for variant in VARIANTS:
        path = REPO / "suites" / f"{variant.name}.toml"
        text = derived_text(variant)
        if args.check:
            if not path.is_file() or path.read_text() != text:
                stale.append(str(path))
        else:
            path.write_text(text)
            print(f"wrote {path}")
    for stale_path in stale:
        print(f"{stale_path}: differs from its derivation; run python -m "
              "harness.suite.cpu_variants", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
