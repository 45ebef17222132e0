"""`harness audit`: which draft layers are causal, per SGLang behaviour and version."""

from __future__ import annotations

import argparse

from harness.errors import ExitCode

BEHAVIOUR_CHOICES = ("legacy", "regressed", "fixed")


class AuditCommand:
    name = "audit"
    help = (
        "Show a DFlash draft's per-layer attention (causal or bidirectional, window) under "
        "every known SGLang behaviour and under one SGLang version's own resolver code; "
        "no GPU needed."
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "config",
            metavar="CONFIG",
            help="the draft's config.json, a checkpoint folder holding one, or a hub id",
        )
        parser.add_argument("--revision", help="hub revision when CONFIG is a hub id")
        version = parser.add_mutually_exclusive_group()
        version.add_argument(
            "--sglang",
            metavar="SPEC",
            help="SGLang version whose resolver code to evaluate: 'sglang==0.5.23' or '0.5.23' "
            "(downloaded wheel, cached), a wheel/sdist path, or 'installed'",
        )
        version.add_argument(
            "--sglang-source",
            metavar="PATH",
            help="an SGLang source checkout whose resolver code to evaluate",
        )
        parser.add_argument(
            "--expect",
            metavar="FILE|SUITE",
            help="expected per-layer contract: a suite name or path (draft.expected_layers), "
            "or a JSON/TOML file with expected_layers; exit 1 when the layers differ",
        )
        parser.add_argument(
            "--behaviour",
            choices=BEHAVIOUR_CHOICES,
            default="fixed",
            help="without --sglang/--sglang-source, the behaviour --expect is checked against "
            "(default: fixed, what SGLang 0.5.18 and later do)",
        )
        parser.add_argument("--json", action="store_true", help="print the audit as JSON")

    def run(self, args: argparse.Namespace) -> int:
        # Imported here so that `harness --help` stays fast.
        import json

        from harness.audit.config import load_draft_config
        from harness.audit.contract import load_expected
        from harness.audit.report import build_report, render
        from harness.audit.source import resolve_source

        config, origin = load_draft_config(args.config, args.revision)
        expected, expected_origin = (None, None)
        if args.expect:
            expected, expected_origin = load_expected(args.expect)
        source = resolve_source(args.sglang, args.sglang_source)
        report = build_report(
            config,
            origin,
            source=source,
            expected=expected,
            expected_origin=expected_origin,
            behaviour=args.behaviour,
        )
        if args.json:
            print(json.dumps(report.to_dict(), indent=2))
        else:
            from rich.console import Console

            render(report, Console())
        # Exit 1 is the CLI's "below the contract" code, shared with floors.
        return ExitCode.BELOW_FLOOR if report.differences else ExitCode.PASS
