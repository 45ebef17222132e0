"""`harness audit`: a draft's contract (attention per layer, taps, block size, mask token,
layers, fc width, what it borrows) under SGLang versions' and vLLM's own code."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Sequence
from pathlib import Path

from rich.console import Console

import harness.builds
import harness.engines.vllm.audit
from harness.audit.change import judge_change
from harness.audit.change import render as render_change
from harness.audit.config import locate_draft_config, parse_config_text
from harness.audit.contract import LayerExpectation, load_expectation, load_expected
from harness.audit.corpus import audit_corpus, load_corpus, load_draft, sglang_columns
from harness.audit.corpus import render as render_corpus
from harness.audit.evaluate import evaluate_sources
from harness.audit.history import bisect
from harness.audit.history import render as render_history
from harness.audit.report import build_report
from harness.audit.report import render as render_report
from harness.audit.source import SGLangSource, checkout_source, spec_source, tree_source
from harness.audit.table import build_versions_report
from harness.audit.table import render as render_versions
from harness.audit.target import AuditTarget, load_target
from harness.audit.vllm import vllm_columns
from harness.audit.wheels import expand_versions
from harness.builds import parse_build_spec
from harness.engines.vllm.audit import VllmLayer, cross_engine_rows, render_rows
from harness.errors import BadInput, ExitCode, HarnessError
from harness.run.exit_codes import check_exit, worst_exit
from harness.suite.attention import DraftConfigError, resolve_layers
from harness.suite.draft_contract import declared_contract

# prints (or, under --vllm, collects) one audit's JSON
Emit = Callable[[dict[str, object]], None]

DEFAULT_RELEASE = "0.5.23"  # --corpus without --sglang


def run(args: argparse.Namespace) -> ExitCode:
    """`harness audit` (its arguments: commands/parsers/audit.py)."""
    try:
        return _run(args)
    except HarnessError as error:
        if args.json:  # a JSON reader gets JSON on stdout, whatever went wrong
            _print({"schema_version": 1, "error": {"type": type(error).__name__,
                                                  "message": str(error)},
                    "exit_code": int(error.exit_code)})
        raise  # the CLI prints the one-line message on stderr and exits with its code


def _run(args: argparse.Namespace) -> ExitCode:
    if args.corpus and args.config:
        raise BadInput("give a draft CONFIG or --corpus DIR, not both")
    if args.change:
        return _change(args)
    if args.corpus:
        return _corpus(args)
    if not args.config:
        raise BadInput("harness audit needs a draft CONFIG (or --corpus DIR)")

    path, origin = locate_draft_config(args.config, args.revision)
    config = parse_config_text(_read(path), origin)  # the harness's only checks
    transformers = _requirement(args.transformers)
    if args.vllm:
        return _both_engines(args, path, config, origin, transformers)
    return _sglang_side(args, path, config, origin, transformers, _print)


def _sglang_side(args: argparse.Namespace, path: Path, config: dict[str, object], origin: str,
                 transformers: str | None, emit: Emit) -> ExitCode:
    """The SGLang audit the options ask for (--bisect, --sglang/--sglang-source, else the
    behaviours), checked against --expect; `emit` prints (or collects) its JSON."""
    if args.bisect:
        return _bisect(args, path, transformers, emit)
    if args.sglang or args.sglang_source:
        return _versions(args, path, origin, transformers, emit)
    return _behaviours(args, config, origin, emit)


def _both_engines(args: argparse.Namespace, path: Path, config: dict[str, object], origin: str,
                  transformers: str | None) -> ExitCode:
    """Everything the same command without --vllm does (the SGLang audit with --expect,
    --sglang, --bisect), then SGLang's per-layer attention (the harness's model of the
    --behaviour) beside vLLM's (its own code), one row per layer, disagreements flagged,
    and vLLM's layers against --expect. The exit code is the worst of them
    (`exit_codes.worst_exit`: 1 over 5 over 0)."""

    build = parse_build_spec(args.vllm, engine="vllm", flag="--vllm")
    expected, expected_origin = _expected(args)  # bad --expect ends here, before any build
    collected: dict[str, object] = {}
    sglang_code = _sglang_side(args, path, config, origin, transformers, collected.update)
    # looked up at the call (tests replace both: no vLLM environment is built there)
    python = harness.builds.prepare_vllm(build).python
    vllm = harness.engines.vllm.audit.vllm_layers(python, Path(path))
    sglang = resolve_layers(config, args.behaviour)
    rows = cross_engine_rows(sglang, vllm["layers"])
    against = _vllm_against_expected(vllm["layers"], expected) if expected else []
    if args.json:
        _print({"config": str(path), "sglang_behaviour": args.behaviour, "vllm": args.vllm,
                "layers": rows, "vllm_v1_refuses": vllm["v1_refuses"], "sglang": collected,
                "expected_origin": expected_origin, "vllm_expect_differences": against})
    else:
        print(f"\ndraft {path}: SGLang ({args.behaviour}, harness model) vs vLLM "
              f"({args.vllm})")
        for line in render_rows(rows, vllm["v1_refuses"]):
            print(line)
        for line in against:
            print(f"vLLM differs from {expected_origin}: {line}")
    differs = any(row["causal_differs"] for row in rows) or bool(against)
    return worst_exit([sglang_code, check_exit(differs)])


def _vllm_against_expected(layers: Sequence[VllmLayer],
                           expected: list[LayerExpectation]  # the expectation file's
                           ) -> list[str]:
    """vLLM's layers against the expected contract: one line per difference."""
    lines = []
    if len(layers) != len(expected):
        lines.append(f"{len(layers)} layers, expected {len(expected)}")
    for i, (layer, want) in enumerate(zip(layers, expected, strict=False)):
        if layer.get("causal") != want["causal"]:
            lines.append(f"layer {i}: causal={layer.get('causal')}, expected {want['causal']}")
        if want.get("window") is not None and layer.get("window") != want["window"]:
            lines.append(f"layer {i}: window={layer.get('window')}, expected {want['window']}")
    return lines


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise DraftConfigError(f"{path}: cannot read: {error}") from error


def _requirement(version: str | None) -> str | None:
    if version is None:
        return None
    return version if version.startswith("transformers") else f"transformers=={version}"


def _expected(args: argparse.Namespace) -> tuple[list[LayerExpectation] | None, str | None]:
    if not args.expect:
        return None, None
    return load_expected(args.expect)


def _print(data: dict[str, object]) -> None:
    print(json.dumps(data, indent=2))


def _console(columns: int = 3) -> Console:
    # Wide enough that no cell is cut: a layer column, a type column, ~14 per version.
    return Console(width=max(100, 24 + 14 * columns, Console().width), soft_wrap=True)


def _sources(args: argparse.Namespace) -> list[SGLangSource]:
    if args.sglang_source:
        return [checkout_source(args.sglang_source)]
    versions = expand_versions(args.sglang)
    if versions is None:
        return [spec_source(args.sglang)]
    return [spec_source(version) for version in versions]


def _target(args: argparse.Namespace) -> AuditTarget | None:
    if not getattr(args, "target", None):
        return None
    return load_target(args.target)


def _versions(args: argparse.Namespace, path: Path, origin: str, transformers: str | None,
              emit: Emit = _print) -> ExitCode:
    config = json.loads(path.read_text(encoding="utf-8"))  # Any: the draft's config.json
    declared = declared_contract(config)  # a malformed contract field: exit 2, named
    expectation = load_expectation(args.expect) if args.expect else None
    target = _target(args)
    results = evaluate_sources(path, _sources(args), transformers, use_cache=not args.no_cache,
                               target=target)
    report = build_versions_report(
        origin, results, expectation.layers if expectation else None,
        expectation.origin if expectation else None, declared,
        expectation.clauses_for(config) if expectation else None)
    if args.json:
        emit(report.to_dict())
    else:
        render_versions(report, _console(len(results)))
    return check_exit(report.verdict == "differs", rejected=bool(report.rejected))


def _bisect(args: argparse.Namespace, path: Path, transformers: str | None,
            emit: Emit = _print) -> ExitCode:
    if not args.repo:
        raise BadInput("--bisect GOOD BAD needs --repo PATH (a local SGLang checkout)")
    good, bad = args.bisect
    result = bisect(path, Path(args.repo), good, bad, transformers)
    if args.json:
        emit(result.to_dict())
    else:
        render_history(result, _console(), good, bad)
    return check_exit(result.first is None)  # no commit found where the contract moved


def _corpus(args: argparse.Namespace) -> ExitCode:
    """`--corpus DIR`: every draft under every version asked for (--sglang, default the
    latest audited release), one batch."""
    if args.bisect or args.expect or args.target:
        raise BadInput("--corpus takes --sglang/--sglang-source (and --vllm), not --bisect, "
                       "--expect or --target (each draft folder holds its own target)")
    drafts = load_corpus(args.corpus)  # bad input ends here, before any engine runs
    if not (args.sglang or args.sglang_source):
        args.sglang = DEFAULT_RELEASE
    sources = _sources(args)
    columns = sglang_columns(drafts, sources, _requirement(args.transformers),
                             use_cache=not args.no_cache)
    if args.vllm:
        for row, extra in zip(columns, vllm_columns(args.vllm, drafts), strict=True):
            row.append(extra)
    audits = audit_corpus(drafts, columns)
    if args.json:
        _print({"schema_version": 1, "corpus": str(args.corpus),
                 "builds": [c.label for c in columns[0]],
                 "drafts": [audit.to_dict() for audit in audits]})
    else:
        render_corpus(audits, _console(len(columns[0])))
    return check_exit(any(audit.flags for audit in audits))


def _change(args: argparse.Namespace) -> ExitCode:
    """`--change BEFORE AFTER`: each draft whose contract the change alters, clause by
    clause (both trees evaluated on every draft in one batch)."""
    if args.bisect or args.sglang or args.sglang_source or args.expect:
        raise BadInput("--change BEFORE AFTER names the two trees itself; it takes no "
                       "--sglang, --sglang-source, --bisect or --expect")
    if args.corpus:
        drafts = load_corpus(args.corpus)
    elif args.config:
        path, _ = locate_draft_config(args.config, args.revision)
        draft = load_draft(Path(path).parent)
        drafts = [draft if not args.target else
                  type(draft)(draft.name, draft.config_file, draft.config, draft.declared,
                              _target(args))]
    else:
        raise BadInput("--change needs a draft CONFIG or --corpus DIR")
    before, after = (tree_source(spec) for spec in args.change)
    columns = sglang_columns(drafts, [before, after], _requirement(args.transformers),
                             use_cache=not args.no_cache)
    changed = judge_change([d.name for d in drafts], columns)
    if args.json:
        _print({"schema_version": 1, "before": before.describe(), "after": after.describe(),
                "drafts": len(drafts), "changed": [c.to_dict() for c in changed]})
    else:
        render_change(changed, len(drafts), before.short, after.short, _console(2))
    return check_exit(bool(changed))


def _behaviours(args: argparse.Namespace, config: dict[str, object], origin: str,
                emit: Emit = _print) -> ExitCode:
    expected, expected_origin = _expected(args)
    report = build_report(config, origin, expected, expected_origin, args.behaviour)
    if args.json:
        emit(report.to_dict())
    else:
        render_report(report, _console())
    # Exit 1 is the CLI's "below the contract" code, shared with floors.
    return check_exit(bool(report.differences))
