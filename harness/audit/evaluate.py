"""Each SGLang version's own code on the config object that version builds.

For every version (a release, a checkout, a commit) the worker (audit/worker.py) runs in a
cached environment holding the `transformers` that version pins: it applies the version's
transformers patches, builds the draft config as SGLang's HF config parser does, and calls
the version's resolver on it. The harness adds nothing of its own: a version whose code
raises gets that exception as its result, never a table. Answers are cached by (config
bytes, version identity, transformers requirement): the same inputs give the same answer.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.audit.envs import ensure_env, run_worker
from harness.audit.errors import AuditLimitError, ResolverError
from harness.audit.findings import ATTENTION, Column, attention_clause
from harness.audit.source import SGLangSource
from harness.audit.target import AuditTarget
from harness.errors import BadInput
from harness.files import cache_root
from harness.suite.attention import BEHAVIOURS, Behaviour, LayerAttention, resolve_layers
from harness.suite.draft_contract import CLAUSES, Clause, clause_from_answer

PROTOCOL = "audit-v3"  # bump when the worker's answer changes meaning: old cache entries die
WORKER = Path(__file__).with_name("worker.py")
EXTRACT = Path(__file__).with_name("extract.py")
CLAUSES_FILE = Path(__file__).with_name("clauses.py")
WORKER_TIMEOUT_S = 300
# Probe drafts that tell the known behaviours apart: each layer type, is_causal unset/true/false.
def _probe(is_causal: bool | None) -> dict[str, object]:
    probe: dict[str, object] = {"num_hidden_layers": 2,
                                "layer_types": ["sliding_attention", "full_attention"],
                                "sliding_window": 8}
    if is_causal is not None:
        probe["is_causal"] = is_causal
    return probe


PROBES: tuple[dict[str, object], ...] = (
    *(_probe(is_causal) for is_causal in (None, True, False)),
    {"num_hidden_layers": 2},
)


@dataclass(frozen=True)
class VersionError:
    """What the version's own code (or transformers at its pin) raised on this config."""

    stage: str  # "load": building the config; "resolve": the resolver
    type: str
    message: str
    where: str | None = None  # e.g. "layer 0"

    @property
    def text(self) -> str:
        return f"{self.type}: {self.message}"

    @property
    def short(self) -> str:
        """Type and the message on one line (a table note; --json has it verbatim). A
        wrapped error's reason is on its last line (pydantic, huggingface_hub's strict
        dataclasses: "Class validation error for validator ...:\n ValueError: <why>"),
        so a long message keeps its first and last lines."""
        lines = [line.strip() for line in self.message.strip().splitlines() if line.strip()]
        text = " ".join(lines)
        if len(text) > 300 and len(lines) > 1:
            head = lines[0] if len(lines[0]) <= 120 else lines[0][:119] + "…"
            tail = lines[-1] if len(lines[-1]) <= 170 else lines[-1][:169] + "…"
            text = f"{head} … {tail}"
        elif len(text) > 300:
            text = text[:299] + "…"
        return f"{self.type}: {text}"

    def to_dict(self) -> dict[str, object]:
        return {"stage": self.stage, "type": self.type, "message": self.message,
                "where": self.where}  # fmt: skip


@dataclass(frozen=True)
class VersionResult:
    """One version's answer: its per-layer table, or the error its code raised."""

    source: SGLangSource
    layers: list[LayerAttention] | None
    error: VersionError | None
    transformers: str | None = None  # the transformers version that built the config
    config_class: str | None = None
    built_by: str | None = None  # SGLang's own config parser, or the fallback used
    behaves_as: list[Behaviour] = field(default_factory=list)
    accepts_plain_dict: bool | None = None
    is_causal: bool | None = None
    # the other clauses (harness/suite/draft_contract.py), by this version's own code
    contract: dict[str, Clause] = field(default_factory=dict)
    contract_limit: str | None = None  # why no clause could be resolved at all

    def column(self) -> Column:
        """This version's resolution as a findings column: the clauses, with per-layer
        attention as one more (`attention`)."""
        label = self.source.short
        if self.error is not None and self.error.stage == "load":
            return Column(label, "sglang", refused=self.error.short)
        clauses = dict(self.contract)
        if self.error is not None:
            clauses[ATTENTION] = Clause(None, error=self.error.short)
        elif self.layers is not None:
            clauses[ATTENTION] = attention_clause(self.layers)
        return Column(label, "sglang", clauses, limit=self.contract_limit)

    def cells(self) -> list[tuple[bool, int | None]] | None:
        """(causal, window) per layer: what the table compares between versions."""
        if self.layers is None:
            return None
        return [(layer.causal, layer.window) for layer in self.layers]

    def to_dict(self) -> dict[str, object]:
        source = self.source
        return {
            "label": source.label, "version": source.version, "kind": source.kind,
            "origin": source.origin, "commit": source.commit,
            "transformers_requirement": source.transformers, "transformers": self.transformers,
            "config_class": self.config_class, "built_by": self.built_by,
            "behaves_as": list(self.behaves_as),
            "accepts_plain_dict": self.accepts_plain_dict, "is_causal": self.is_causal,
            "layers": None if self.layers is None
            else [layer.audit_dict() for layer in self.layers],
            "error": None if self.error is None else self.error.to_dict(),
            "contract": {name: clause.to_dict() for name, clause in self.contract.items()},
            "contract_limit": self.contract_limit,
        }  # fmt: skip


def _window(window_left: int | None) -> int | None:
    # SGLang stores window_left = sliding_window - 1 (HF windows include the token itself).
    return None if window_left is None or window_left < 0 else int(window_left) + 1


def _layers(answer: Mapping[str, Any]) -> list[LayerAttention]:  # JSON: the worker's answer
    types = answer.get("layer_types") or []
    flipped = answer.get("flipped")
    layers = []
    for index, (window_left, kind) in enumerate(answer["layers"]):
        causal = kind == "DECODER"
        explicit = flipped is not None and (flipped[index][1] == "DECODER") != causal
        layer_type = types[index] if index < len(types) and isinstance(types[index], str) else None
        layers.append(LayerAttention(index, layer_type, _window(window_left), causal, explicit))
    return layers


def _behaves_as(probes: Sequence[Any]) -> list[Behaviour]:
    matched: list[Behaviour] = []
    if len(probes) != len(PROBES):
        return matched
    for behaviour in BEHAVIOURS:
        if all(isinstance(got, list) and [(_window(w), k == "DECODER") for w, k in got]
               == [(lay.window, lay.causal) for lay in resolve_layers(probe, behaviour)]
               for probe, got in zip(PROBES, probes, strict=True)):  # fmt: skip
            matched.append(behaviour)
    return matched


def _result(source: SGLangSource, answer: Mapping[str, Any]) -> VersionResult:
    """`answer`: the worker's JSON, as its process wrote it (Any: read, not validated)."""
    error = answer.get("error")
    if error:
        if error["stage"] == "extract":
            raise ResolverError(f"{source.label}: {error['message']} (read from {source.origin})")
        if error["stage"] == "harness":
            raise AuditLimitError(f"{source.label}: {error['message']}")
        contract, limit = _contract(answer.get("contract"))
        return VersionResult(source, None, VersionError(error["stage"], error["type"],
                             error["message"], error.get("where")), answer.get("transformers"),
                             answer.get("config_class"), answer.get("built_by"),
                             _behaves_as(answer.get("probes") or []), None, None,
                             contract, limit)
    contract, limit = _contract(answer.get("contract"))
    return VersionResult(
        source, _layers(answer), None, answer.get("transformers"), answer.get("config_class"),
        answer.get("built_by"), _behaves_as(answer.get("probes") or []),
        answer.get("accepts_plain_dict"), answer.get("is_causal"), contract, limit,
    )


def _contract(answer: Any) -> tuple[dict[str, Clause], str | None]:
    if not isinstance(answer, Mapping):
        return {}, "this answer has no clauses"
    if isinstance(answer.get("limit"), str):
        return {}, answer["limit"]
    return {name: clause_from_answer(answer.get(name)) for name in CLAUSES}, None


def _cache_file(config_bytes: bytes, source: SGLangSource, requirement: str,
                target: AuditTarget | None) -> Path:
    digest = hashlib.sha256(b"\0".join(
        [PROTOCOL.encode(), config_bytes, source.identity.encode(), requirement.encode(),
         EXTRACT.read_bytes(), WORKER.read_bytes(), CLAUSES_FILE.read_bytes(),
         "\0".join(sorted(source.contract_files)).encode(),
         (target.fingerprint if target else "").encode(),
         *_target_code(source, target), *_draft_code(config_bytes, source)]
    )).hexdigest()[:32]  # fmt: skip
    return results_dir() / f"{digest}.json"


def _draft_code(config_bytes: bytes, source: SGLangSource) -> list[bytes]:
    """The config class this tree registers for the draft's model_type, if any."""
    try:
        raw = json.loads(config_bytes)
    except ValueError:
        return []
    spec = source.config_class(_model_type(raw))
    return [hashlib.sha256(spec["text"].encode()).hexdigest().encode()] if spec else []


def _target_code(source: SGLangSource, target: AuditTarget | None) -> list[bytes]:
    """The target class's files in this tree (what resolves its capture points): part of
    the answer's identity, since a checkout's identity does not cover them."""
    if target is None:
        return []
    files = source.model_files(target.architecture or "")
    spec = source.config_class(target.model_type)
    texts = [f"{path}\0{text}" for path, text in sorted(files.items())]
    if spec:
        texts.append(spec["text"])
    return [hashlib.sha256("\0".join(texts).encode()).hexdigest().encode()]


def results_dir() -> Path:
    """Cached answers: $HARNESS_AUDIT_RESULTS, else <harness cache>/audit/results."""
    explicit = os.environ.get("HARNESS_AUDIT_RESULTS")
    return Path(explicit) if explicit else cache_root() / "audit" / "results"


@dataclass
class _Job:
    source: SGLangSource
    requirement: str
    config: int  # index into the configs evaluated together
    cache: Path
    answer: dict[str, object] | None = None


@dataclass(frozen=True)
class _Draft:
    file: Path
    raw: Any
    folder: Path  # what SGLang is given: a folder holding config.json
    target: AuditTarget | None = None


def _job_request(index: int, job: _Job, drafts: Sequence[_Draft]) -> dict[str, object]:
    source, draft = job.source, drafts[job.config]
    target = draft.target
    return {"id": str(index), "label": source.label, "files": dict(source.files),
            "config": job.config, "loader": dict(source.loader),
            "config_class": source.config_class(_model_type(draft.raw)),
            "contract_files": dict(source.contract_files),
            "target_model": source.model_files(target.architecture or "") if target else {},
            "target_config_class": source.config_class(target.model_type) if target else None}


def _request(drafts: Sequence[_Draft], jobs: list[_Job]) -> dict[str, object]:
    # Built in the main thread: ast.parse (config_class) is not safe across threads in 3.11.
    return {
        "configs": [{"dir": str(draft.folder), "raw": draft.raw,
                     "target": draft.target.request() if draft.target else None}
                    for draft in drafts],
        "probes": list(PROBES),
        "patches": dict(jobs[0].source.patches),
        "jobs": [_job_request(i, job, drafts) for i, job in enumerate(jobs)],
    }  # fmt: skip


def _run_worker(python: Path, request: dict[str, object], jobs: list[_Job]) -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_VERBOSITY": "error",
           "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    answer = run_worker(python, WORKER, request, env, WORKER_TIMEOUT_S,
                        f"the audit worker in {python}")
    for i, job in enumerate(jobs):
        job.answer = {**answer["results"][str(i)], "transformers": answer.get("transformers")}


def _model_type(raw: Any) -> str:
    value = raw.get("model_type") if isinstance(raw, dict) else None
    return value if isinstance(value, str) else ""


def evaluate_sources(
    config_file: Path,
    sources: Sequence[SGLangSource],
    transformers: str | None = None,
    use_cache: bool = True,
    target: AuditTarget | None = None,
) -> list[VersionResult]:
    """Every source's answer on the draft config in `config_file`, in the order given.

    `transformers` overrides the requirement each version pins (for a checkout without one);
    `target`: the target the taps and the mask token's id are resolved against.
    """
    return evaluate_many([config_file], sources, transformers, use_cache, [target])[0]


def evaluate_many(
    config_files: Sequence[Path],
    sources: Sequence[SGLangSource],
    transformers: str | None = None,
    use_cache: bool = True,
    targets: Sequence[AuditTarget | None] | None = None,
) -> list[list[VersionResult]]:
    """Every source on every config (one list per config, each with its target, if any);
    one worker per environment."""
    texts = [path.read_bytes() for path in config_files]
    targets = list(targets) if targets is not None else [None] * len(config_files)
    jobs: list[_Job] = []
    for index, config_bytes in enumerate(texts):
        for source in sources:
            requirement = transformers or source.transformers
            if requirement is None:
                raise BadInput(f"{source.describe()} pins no transformers version (no "
                               "Requires-Dist or pyproject dependency); name one (harness audit "
                               "--transformers VERSION; audit_for_build(transformers=...))")
            job = _Job(source, requirement, index,
                       _cache_file(config_bytes, source, requirement, targets[index]))
            if use_cache and job.cache.is_file():
                job.answer = json.loads(job.cache.read_text())
            jobs.append(job)
    pending = [job for job in jobs if job.answer is None]
    if pending:
        _evaluate_pending(config_files, texts, pending, targets)
    results: list[list[VersionResult]] = [[] for _ in config_files]
    for job in jobs:
        assert job.answer is not None
        result = _result(job.source, job.answer)  # raises for the harness's own failures
        if use_cache and not job.cache.is_file():
            job.cache.parent.mkdir(parents=True, exist_ok=True)
            temporary = job.cache.with_suffix(f".{os.getpid()}.tmp")
            temporary.write_text(json.dumps(job.answer))
            temporary.replace(job.cache)
        results[job.config].append(result)
    return results


def _evaluate_pending(config_files: Sequence[Path], texts: Sequence[bytes],
                      pending: list[_Job], targets: Sequence[AuditTarget | None]) -> None:
    # One worker per (transformers pin, SGLang patches): patches change transformers for
    # the whole process, as `import sglang` does, so two versions' patches never mix.
    groups: dict[tuple[str, str], list[_Job]] = {}
    for job in pending:
        patches = json.dumps(dict(job.source.patches), sort_keys=True)
        groups.setdefault((job.requirement, patches), []).append(job)
    pythons = {requirement: ensure_env(requirement) for requirement, _ in groups}
    with tempfile.TemporaryDirectory(prefix="harness-audit-") as scratch:
        drafts = []
        for index, (path, text) in enumerate(zip(config_files, texts, strict=True)):
            folder = path.parent
            if path.name != "config.json":  # SGLang reads a checkpoint folder's config.json
                folder = Path(scratch) / str(index)
                folder.mkdir()
                (folder / "config.json").write_bytes(text)
            drafts.append(_Draft(path, json.loads(text), folder, targets[index]))
        workers = max(1, min(len(groups), os.cpu_count() or 1))
        with ThreadPoolExecutor(max_workers=workers) as pool:
            requests = [(pythons[req], _request(drafts, jobs), jobs)
                        for (req, _), jobs in groups.items()]  # fmt: skip
            futures = [pool.submit(_run_worker, *request) for request in requests]
            for future in futures:
                future.result()
