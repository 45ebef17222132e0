"""Real clients against the reference engine: SGLang's own `run_eval` and DFlash's client.

SGLang's client code runs from the 0.5.23 wheel ($HARNESS_SGLANG_WHEELS), unmodified and
never copied into the project: `sglang/test/run_eval.py`, `simple_eval_common.py` (its
samplers), `simple_eval_mixed_prefix_gsm8k.py` (GSM8KEval) and `sgl_eval_utils.py` are
extracted into a temporary folder per session. Two modules they import would pull in torch
and all of SGLang, so they are built from parts: `sglang/utils.py` gets the wheel's own
`read_jsonl` and `download_and_cache_file` (taken with `ast`), and
`sglang/test/test_utils.py` a no-op `dump_metric` (SGLang's CI metric printer).
The DFlash client is PyPI `dflash==0.1.0` (the `reference` extra).
"""

from __future__ import annotations

import ast
import os
import zipfile
from pathlib import Path

import pytest

from harness.workloads.gsm8k import default_data_paths

SGLANG_VERSION = "0.5.23"
CLIENT_FILES = ("run_eval.py", "simple_eval_common.py", "simple_eval_mixed_prefix_gsm8k.py",
                "sgl_eval_utils.py")
UTILS_HEADER = "import json\nimport os\nfrom typing import Optional\n\nimport requests\n" \
               "from tqdm import tqdm\n\n\n"


def sglang_wheel() -> Path | None:
    folder = os.environ.get("HARNESS_SGLANG_WHEELS")
    found = sorted(Path(folder).glob(f"sglang-{SGLANG_VERSION}-*.whl")) if folder else []
    return found[0] if found else None


@pytest.fixture(scope="session")
def run_eval_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder to put on PYTHONPATH so that `python -m sglang.test.run_eval` runs."""
    pytest.importorskip("openai", reason="SGLang's run_eval needs the openai package")
    wheel = sglang_wheel()
    if wheel is None:
        pytest.skip(f"no sglang {SGLANG_VERSION} wheel in $HARNESS_SGLANG_WHEELS")
    root = tmp_path_factory.mktemp("sglang-client")
    package = root / "sglang" / "test"
    package.mkdir(parents=True)
    with zipfile.ZipFile(wheel) as archive:
        for name in CLIENT_FILES:
            (package / name).write_bytes(archive.read(f"sglang/test/{name}"))
        utils = archive.read("sglang/utils.py").decode()
    tree = ast.parse(utils)
    wanted = [node for node in tree.body if isinstance(node, ast.FunctionDef)
              and node.name in ("read_jsonl", "download_and_cache_file")]
    assert len(wanted) == 2, "sglang/utils.py no longer has read_jsonl/download_and_cache_file"
    (root / "sglang" / "utils.py").write_text(
        UTILS_HEADER + "\n\n".join(ast.get_source_segment(utils, n) for n in wanted) + "\n")
    (root / "sglang" / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "test_utils.py").write_text(
        "def dump_metric(metric_name, value, labels=None):\n    pass\n")
    return root


@pytest.fixture(scope="session")
def gsm8k_path() -> Path:
    for candidate in default_data_paths():
        if candidate.is_file():
            return candidate
    pytest.skip("no local GSM8K test.jsonl ($HARNESS_DATA_DIR or ../shared/data)")


# The engine: tests/reference_engine/conftest.py's session `server` (one per xdist worker,
# shared with the other reference tests); each test here flushes its counters first, so the
# server's figure covers that test's client traffic only.
