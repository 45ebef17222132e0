"""Planted defects, one per clause of the draft's contract, on the real SGLang CPU suite.

Each is a patch in SGLang's repository layout or a config edit (of the draft's config.json,
or of the suite), applied to `tiny_dflash_sglang_cpu` on SGLang 0.5.23, at one level: the
configuration (the checkpoint, the launch line, what configures the target's capture), the
resolver (the code the audit runs), the target's forward (where a capture is taken) or the
kernel call. A defect in the configuration or the resolver must be caught by the preflight
audit (`harness run` exits 1 before any launch, naming the clause) and, measured anyway
(`--no-enforce-contract`), again at run time from what reached the model; one at forward
time or in the kernel call is invisible to the audit and must be caught at run time (exit
3, naming the clause). docs/audit.md ("Planted defects") has the accept length each costs.

    python -m tests.audit.planted DEFECT OUT   # prints the `harness run` arguments

An edited draft is a folder in OUT holding the edited config.json beside links to the
shipped draft's other files (its weights and tokenizer), so only the config differs.
"""

from __future__ import annotations

import json
import shutil
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "suites" / "tiny_dflash_sglang_cpu.toml"
DRAFT = ROOT / "reference_engine" / "tiny" / "draft-capturable"
CHANGES = Path(__file__).with_name("changes")


Level = Literal["configuration", "resolver", "forward", "kernel"]
STATIC_LEVELS = ("configuration", "resolver")  # the preflight audit sees these


@dataclass(frozen=True)
class Defect:
    clause: str
    what: str  # one line for the docs' table
    level: Level = "configuration"
    patch: Path | None = None  # SGLang repository layout, applied with --patch
    draft_edit: dict[str, Any] = field(default_factory=dict)  # dotted key -> value (None: drop)
    suite_edit: dict[str, Any] = field(default_factory=dict)  # dotted key -> value


DEFECTS = {
    "attention": Defect("attention", "PR #34524 reverted: sliding layers bidirectional",
                        level="resolver",
                        patch=ROOT / "tests" / "sglang_dflash_cpu" / "revert_pr_34524.diff"),
    "attention_kernel": Defect("attention", "the intel_amx backend ignores ENCODER_ONLY: "
                                            "the full layer's kernel call is causal",
                               level="kernel", patch=ROOT / "tests" / "sglang_dflash_cpu"
                               / "backend_ignores_encoder_only.diff"),
    "taps": Defect("taps", "Qwen3's set_dflash_layers_to_capture without its + 1: the "
                           "target captures each tap one layer early",
                   patch=CHANGES / "qwen3_taps_one_early.diff"),
    "taps_forward": Defect("taps", "Qwen3Model.forward hands each capture to the layer "
                                   "before (`i + 1 in layers_to_capture`), the configured "
                                   "list untouched",
                           level="forward",
                           patch=CHANGES / "qwen3_capture_one_early_at_forward.diff"),
    "mask_token_id": Defect("mask_token_id", "the draft's mask_token_id 2 -> 1 (the pad "
                                             "token: NeMo-Automodel #2461)",
                            draft_edit={"dflash_config.mask_token_id": 1}),
    "block_size": Defect("block_size", "the suite's num_draft_tokens 8 -> 4 (the server "
                                       "serves blocks of 4 to a draft trained on 8)",
                         suite_edit={"speculative.num_draft_tokens": 4}),
    "fc_input_width": Defect("fc_input_width", "the draft's target_layer_ids dropped: "
                                               "SGLang's fallback formula picks the taps",
                             draft_edit={"dflash_config.target_layer_ids": None}),
    "block_size_resolver": Defect("block_size", "parse_dflash_draft_config no longer reads "
                                                "a top-level block_size (engine default 16)",
                                  level="resolver",
                                  patch=CHANGES / "block_size_top_level_ignored.diff"),
    "mask_token_id_resolver": Defect("mask_token_id", "parse_dflash_draft_config reads "
                                                      "mask_token_id only at the top level, "
                                                      "not from dflash_config",
                                     level="resolver", patch=CHANGES
                                     / "mask_token_id_from_dflash_config_ignored.diff"),
    "embeddings_resolver": Defect("embeddings", "_resolve_dflash_embedding_module's "
                                                "condition inverted: the draft's own "
                                                "embeddings for every non-Nemotron draft",
                                  level="resolver",
                                  patch=CHANGES / "embedding_resolver_inverted.diff"),
    # One launch for four clauses (the record names each): the worker's draft step given
    # the wrong block size, mask id, embeddings and head, the configuration untouched. The
    # suite serves blocks of 4 and expects 4 (so the preflight passes): the draft keeps
    # its checkpoint's 8 only if set_block_size is never called.
    "forward": Defect("block_size, mask_token_id, embeddings, lm_head",
                      "DFlashWorkerV2 never calls set_block_size, zero-fills the draft block, "
                      "embeds it through the head's weight and samples it with the "
                      "embedding module",
                      level="forward", patch=CHANGES / "dflash_forward_defects.diff",
                      suite_edit={"speculative.num_draft_tokens": 4,
                                  "draft.expected_contract": {
                                      "taps": [1, 2, 3], "block_size": 4, "mask_token_id": 2,
                                      "draft_layers": 5, "fc_input_width": 384,
                                      "embeddings": "target", "lm_head": "target"}}),
}


def _set(document: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, leaf = dotted.split(".")
    for part in parents:
        document = document.setdefault(part, {})
    if value is None:
        document.pop(leaf, None)
    else:
        document[leaf] = value


def edited_draft(edit: dict[str, Any], out: Path) -> Path:
    folder = out / "draft"
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    for item in DRAFT.iterdir():
        if item.name != "config.json":
            (folder / item.name).symlink_to(item)
    config = json.loads((DRAFT / "config.json").read_text())
    for dotted, value in edit.items():
        _set(config, dotted, value)
    (folder / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    return folder


def edited_suite(edit: dict[str, Any], out: Path) -> Path:
    """The suite with one value changed (a TOML line rewritten in place, every comment and
    every other line kept)."""
    text = SUITE.read_text()
    for dotted, value in edit.items():
        section, key = dotted.rsplit(".", 1)
        assert tomllib.loads(text)[section][key] is not None
        lines, inside = [], False
        for line in text.splitlines():
            if line.startswith("["):
                inside = line.strip() == f"[{section}]"
            if inside and line.split("=")[0].strip() == key:
                line = f"{key} = {_toml(value)}  # planted defect"
            lines.append(line)
        text = "\n".join(lines) + "\n"
    path = out / SUITE.name
    out.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _toml(value: Any) -> str:
    """A value as TOML writes it: JSON's scalars and lists are TOML's; a table inline."""
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + " }"
    return json.dumps(value)


def run_arguments(clause: str, out: Path) -> list[str]:
    defect = DEFECTS[clause]
    suite = edited_suite(defect.suite_edit, out) if defect.suite_edit else SUITE
    arguments = [str(suite), "--sglang", "sglang==0.5.23"]
    if defect.patch is not None:
        arguments += ["--patch", str(defect.patch)]
    if defect.draft_edit:
        arguments += ["--draft-model", str(edited_draft(defect.draft_edit, out))]
    return arguments


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in DEFECTS:
        print(f"usage: python -m tests.audit.planted {{{','.join(DEFECTS)}}} OUT",
              file=sys.stderr)
        sys.exit(2)
    print(" ".join(run_arguments(sys.argv[1], Path(sys.argv[2]))))
