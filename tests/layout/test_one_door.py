"""One door to stored results (issues 29, 37, 52): no code outside the door opens a run
record, request rows, a calibration record, a forced-acceptance ladder's record or the
loader's index itself. Each of those reads goes
through `harness.results.readers` (the index's own files through `harness.results.index`),
which reads only regular files of bounded size and checks every figure; a new raw read
anywhere else fails here, naming the function, and so does a second reader of records
(`read_run`, `read_requests`, a parse into the record model) outside the door."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.layout.test_imports import PACKAGE

# The door: it opens the files through checks.read_regular (the index reads its own log
# and snapshot, copies of the records' rows).
DOORS = {"results/checks.py", "results/readers.py", "results/index.py"}
DOOR = "results/readers.py"
# What only the door defines or calls: a reader of records, a parse into the record model.
READERS = {"read_run", "read_run_data", "read_requests", "read_record", "read_record_file",
           "parse_run", "parse_record", "iter_request_rows", "read_forced"}
PARSES = {"model_validate", "model_validate_json", "model_construct"}
RECORD_MODELS = {"RunRecord", "RequestRow", "ForcedRecord"}
# Names of the stored files (layout's constants and their spellings).
STORED = {"RUN_FILE", "REQUESTS_FILE", "INDEX_FILE", "SNAPSHOT_FILE", "CALIBRATIONS_DIR",
          "run.json", "requests.jsonl", ".index.jsonl", ".index-snapshot.json", "calibrations",
          "FORCED_FILE", "forced.json"}
READS = {"read_text", "read_bytes", "load", "loads", "open", "fdopen"}


def _names(node: ast.AST) -> set[str]:
    found = set()
    for child in ast.walk(node):
        if isinstance(child, ast.Name):
            found.add(child.id)
        elif isinstance(child, ast.Attribute):
            found.add(child.attr)
        elif isinstance(child, ast.Constant) and isinstance(child.value, str):
            found.add(child.value)
    return found


def _raw_reads(function: ast.AST) -> list[int]:
    """Lines of calls in `function` that read a file's text or parse JSON (not a write:
    `open(..., "w"/"a")`)."""
    lines = []
    for node in ast.walk(function):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else \
            func.id if isinstance(func, ast.Name) else ""  # fmt: skip
        if name not in READS:
            continue
        if name in ("load", "loads") and not (isinstance(func, ast.Attribute)
                                              and isinstance(func.value, ast.Name)
                                              and func.value.id == "json"):
            continue
        if name == "loads" and node.args and isinstance(node.args[0], ast.Call) and \
                getattr(node.args[0].func, "attr", "") == "dumps":
            continue  # json.loads(json.dumps(x)): a deep copy, no file
        modes = [a.value for a in node.args[1:2] if isinstance(a, ast.Constant)]
        modes += [k.value.value for k in node.keywords
                  if k.arg == "mode" and isinstance(k.value, ast.Constant)]
        if name == "open" and any(isinstance(m, str) and set(m) & set("wax") for m in modes):
            continue
        lines.append(node.lineno)
    return lines


def offenders(package: Path = PACKAGE) -> list[str]:
    found = []
    for path in sorted(package.rglob("*.py")):
        relative = path.relative_to(package).as_posix()
        if relative in DOORS:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            if node.name.startswith(("write", "save", "_write")):
                continue
            reads = _raw_reads(node)
            if reads and _names(node) & STORED:
                found.append(f"{relative}:{reads[0]} {node.name}")
    return sorted(set(found))


def test_no_raw_read_of_stored_results_outside_the_doors() -> None:
    assert offenders() == []


def second_readers(package: Path = PACKAGE) -> list[str]:
    """Functions outside the door that define a reader of records, or parse a record
    model from data (`RunRecord.model_validate(...)`)."""
    found = []
    for path in sorted(package.rglob("*.py")):
        relative = path.relative_to(package).as_posix()
        if relative == DOOR:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name in READERS:
                found.append(f"{relative}:{node.lineno} def {node.name}")
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr in PARSES and isinstance(node.func.value, ast.Name) \
                    and node.func.value.id in RECORD_MODELS:
                found.append(f"{relative}:{node.lineno} {node.func.value.id}.{node.func.attr}")
    return found


def test_one_reader_of_records() -> None:
    """One `read_run` (issue 37: there were three, returning three shapes)."""
    assert second_readers() == []


def _package_with(tmp_path: Path, module: str, source: str) -> Path:
    """A package `harness` in `tmp_path` holding only `module` (a path in it)."""
    package = tmp_path / "harness"
    (package / module).parent.mkdir(parents=True)
    (package / module).write_text(source)
    return package


def test_the_check_finds_a_second_reader(tmp_path: Path) -> None:
    package = _package_with(
        tmp_path, "analysis/sides.py",
        "def read_run(run_dir):\n"
        "    return RunRecord.model_validate(load(run_dir))\n"
        "def fine(record):\n"
        "    return record.model_dump()\n")
    assert second_readers(package) == ["analysis/sides.py:1 def read_run",
                                       "analysis/sides.py:2 RunRecord.model_validate"]


def test_the_check_finds_a_raw_read(tmp_path: Path) -> None:
    """Each form a raw read took before issue 29 (paired_report, power, pairing,
    calibrate) is found."""
    package = _package_with(
        tmp_path, "analysis/report.py",
        "import json\n"
        "def latest(run_dir):\n"
        "    return json.loads((run_dir / RUN_FILE).read_text(encoding='utf-8'))\n"
        "def power(run_dir):\n"
        "    return json.loads((run_dir / 'run.json').read_text())\n"
        "def calibration(folder):\n"
        "    for path in (folder / CALIBRATIONS_DIR).glob('*.json'):\n"
        "        with open(path) as handle:\n"
        "            return json.load(handle)\n"
        "def fine(run_dir):\n"
        "    with open(run_dir / RUN_FILE, 'w') as handle:\n"
        "        handle.write('{}')\n"
        "    return json.loads(json.dumps({'a': 1}))\n")
    assert offenders(package) == ["analysis/report.py:3 latest",
                                  "analysis/report.py:5 power",
                                  "analysis/report.py:8 calibration"]
