"""Suites: TOML documents validated by a schema, loaded by path or by name; the suite's
public names.

A suite declares a target/draft pair, the speculative settings, the GPU
topology, a workload, floors and known baselines (those parts in
`harness.suite.serving` and `harness.suite.entries`, put together in
`harness.suite.schema`), and optionally further workload entries, each run as
its own series `<suite>.<entry>` (`harness.suite.series`). Every field is checked; a bad
one gives a message naming the file, the field and what is allowed.

This module loads suites and re-exports (`__all__`) the names most callers use, so
`from harness.suite.model import load_suite, Suite, suite_entries` stays the one import.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from harness.errors import SuiteError
from harness.files import SUITES_DIR
from harness.secrets import redact_text, register_document
from harness.suite.document import DocumentError, load_toml
from harness.suite.entries import (
    IMPOSSIBLE,
    METRIC_DEFINITIONS,
    WORKLOAD_KINDS,
    Baseline,
    CategoryFloor,
    Floors,
    GSM8KWorkload,
    HumanEvalWorkload,
    JsonlWorkload,
    Metric,
    SpecBenchWorkload,
    Workload,
)
from harness.suite.gate import Gate
from harness.suite.schema import LoadedSuite, Suite, document_sha256
from harness.suite.series import Entry, series_name, series_names, suite_entries
from harness.suite.serving import VLLMEngine

__all__ = [
    "METRIC_DEFINITIONS",
    "Baseline",
    "CategoryFloor",
    "Entry",
    "Floors",
    "GSM8KWorkload",
    "Gate",
    "HumanEvalWorkload",
    "JsonlWorkload",
    "LoadedSuite",
    "Metric",
    "SpecBenchWorkload",
    "Suite",
    "VLLMEngine",
    "Workload",
    "load_suite",
    "parse_suite",
    "series_name",
    "series_names",
    "suite_entries",
]

# Union members pydantic names in an error's location (`model.constrained-str`): not fields.
_UNION_MEMBERS = frozenset({"constrained-str", "str", "EnvModel"})
_TAGS = {"engine": ("sglang", "reference", "vllm"), "workload": WORKLOAD_KINDS}


def _location(loc: tuple[object, ...]) -> str:
    parts = [str(p) for p in loc if str(p) not in _UNION_MEMBERS
             and not str(p).startswith(("function-after", "tagged-union"))]
    # drop discriminator tags that pydantic inserts: `engine.sglang.x`, `workload.gsm8k.x`,
    # `workloads.0.spec_bench.x`
    if len(parts) >= 2 and parts[1] in _TAGS.get(parts[0], ()):
        parts.pop(1)
    if len(parts) >= 3 and parts[0] == "workloads" and parts[2] in WORKLOAD_KINDS:
        parts.pop(2)
    return ".".join(parts) or "(document)"


def _describe(error: ErrorDetails) -> str:
    kind = error["type"]
    ctx = error.get("ctx") or {}
    if kind == IMPOSSIBLE:
        return str(ctx.get("problem"))
    if kind == "extra_forbidden":
        return "unknown field (check the spelling; see `harness show` of a shipped suite)"
    if kind == "missing":
        return "required field is missing"
    if kind == "literal_error":
        return f"got {error.get('input')!r}; allowed: {ctx.get('expected')}"
    if kind == "union_tag_invalid":
        return f"got {ctx.get('tag')!r}; allowed: {ctx.get('expected_tags')}"
    if kind == "union_tag_not_found":
        return (f"missing `{ctx.get('discriminator', 'kind')}`; allowed: 'sglang', "
                "'reference', 'vllm'")
    if kind == "value_error" and isinstance(error.get("input"), dict | list):
        return str(error["msg"]).removeprefix("Value error, ")  # the message names it
    if kind == "workload_kind":
        kind_given = error.get("input", {}).get("kind") if isinstance(error.get("input"),
                                                                      dict) else None
        return f"got kind {kind_given!r}; allowed: {', '.join(WORKLOAD_KINDS)}"
    return f"{error['msg']} (got {error.get('input')!r})"


def format_validation_error(source: str, error: ValidationError) -> str:
    """One line per bad field; a field that may take several shapes gets one line naming
    what each shape wanted."""
    by_field: dict[str, list[str]] = {}
    for item in error.errors():
        described = _describe(item)
        where = _location(item["loc"])
        if item["type"] == IMPOSSIBLE:  # the validator named the field below its model
            field = str((item.get("ctx") or {}).get("field"))
            where = field if where == "(document)" else f"{where}.{field}"
        problems = by_field.setdefault(where, [])
        if described not in problems:
            problems.append(described)
    lines = [f"{source}: invalid suite"]
    lines += [f"  {where}: {' or '.join(problems)}" for where, problems in by_field.items()]
    return "\n".join(lines)


def read_document(text: str, source: str) -> dict[str, object]:
    """The suite's TOML as a document within the limits of `harness.suite.document`
    (nesting, finite numbers, 64-bit integers); SuiteError naming the file and field."""
    try:
        return load_toml(text)
    except DocumentError as error:
        if not error.field:
            raise SuiteError(f"{source}: {error.problem}") from None
        raise SuiteError(f"{source}: invalid suite\n  {error.field}: {error.problem}") from None


def parse_suite(text: str, source: str) -> tuple[Suite, dict[str, object]]:
    document = read_document(text, source)
    register_document(document)  # at load: redacted in every output from now on
    try:
        return Suite.model_validate(document), document
    except ValidationError as error:
        # the error quotes the values it rejects: a secret among them stays hidden
        raise SuiteError(redact_text(format_validation_error(source, error))) from None


def resolve_suite_path(spec: str, suites_dir: Path = SUITES_DIR) -> Path:
    """A suite given as a path, or as a name found in `suites/` (file stem or `name`)."""
    path = Path(spec)
    if path.suffix == ".toml" or path.exists():
        if not path.is_file():
            raise SuiteError(f"{spec}: no such suite file")
        return path
    candidate = suites_dir / f"{spec}.toml"
    if candidate.is_file():
        return candidate
    for file in sorted(suites_dir.glob("*.toml")):
        try:
            if read_document(file.read_text(encoding="utf-8"), str(file)).get("name") == spec:
                return file
        except (OSError, UnicodeDecodeError, SuiteError):
            continue
    names = ", ".join(p.stem for p in sorted(suites_dir.glob("*.toml"))) or "none"
    raise SuiteError(f"{spec}: no suite file or suite name matches; known suites: {names}")


def load_suite(spec: str | Path, suites_dir: Path = SUITES_DIR) -> LoadedSuite:
    path = resolve_suite_path(str(spec), suites_dir)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise SuiteError(f"{path}: cannot read suite: {error}") from None
    suite, document = parse_suite(text, str(path))
    return LoadedSuite(suite=suite, path=path, sha256=document_sha256(document), document=document)


def shipped_suites(suites_dir: Path = SUITES_DIR) -> list[Path]:
    return sorted(suites_dir.glob("*.toml"))
