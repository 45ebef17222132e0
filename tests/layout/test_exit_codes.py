"""Every exit code is decided in one place (harness/run/exit_codes.py, the judge's): the
commands return what it returns, never a number of their own, and no other module chooses
between codes (a conditional whose branches are codes, a code returned under an `if`, codes
compared or ranked). The enum itself is harness/errors.py's."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "harness"
HOME = PACKAGE / "run" / "exit_codes.py"
ENUM = PACKAGE / "errors.py"
COMMANDS = [*sorted((PACKAGE / "commands").rglob("*.py")), PACKAGE / "cli.py"]

# file (relative to harness/) -> why it may choose a code itself
ALLOWED: dict[str, str] = {
    "cli.py": "the entry point: no command named prints the usage and is bad input",
}


def _where(path: Path, node: ast.AST) -> str:
    shown = path.relative_to(PACKAGE.parent) if path.is_relative_to(PACKAGE.parent) else path
    return f"{shown}:{getattr(node, 'lineno', '?')}"


def _literal_int(node: ast.AST | None) -> bool:
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
            and node.func.id == "int" and node.args:
        node = node.args[0]
    return isinstance(node, ast.Constant) and type(node.value) is int


def _is_exit(node: ast.AST | None) -> bool:
    """`sys.exit(...)`, `exit(...)`, `SystemExit(...)`."""
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    return name in {"exit", "SystemExit", "_exit"}


def literal_codes(path: Path) -> list[str]:
    """Each `return N`, `int(N)` returned, and `sys.exit(N)` / `SystemExit(N)` in a file."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        returned = isinstance(node, ast.Return) and _literal_int(node.value)
        exited = isinstance(node, ast.Call) and _is_exit(node) \
            and any(_literal_int(arg) for arg in node.args)
        if returned or exited:
            found.append(_where(path, node))
    return found


def _names_a_code(node: ast.AST) -> bool:
    """An ExitCode member (`ExitCode.X`, `int(ExitCode.X)`), a status's code
    (`EXIT_CODES[...]`) or a module's own code constant (`EXIT_*`)."""
    for part in ast.walk(node):
        if isinstance(part, ast.Attribute) and isinstance(part.value, ast.Name) \
                and part.value.id == "ExitCode":
            return True
        if isinstance(part, ast.Name) and part.id.startswith("EXIT_") \
                and part.id != "EXIT_CODE_MEANINGS":
            return True
    return False


def _decides(node: ast.AST) -> bool:
    """A conditional expression with a code in a branch, codes compared, codes ranked by
    `max`/`min`, a module constant named EXIT_* that is a bare number."""
    if isinstance(node, ast.IfExp):
        return _names_a_code(node.body) or _names_a_code(node.orelse)
    if isinstance(node, ast.Compare):
        return any(_names_a_code(side) for side in (node.left, *node.comparators))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
            and node.func.id in {"max", "min"}:
        return any(_names_a_code(arg) or "exit_code" in ast.unparse(arg) for arg in node.args)
    if isinstance(node, ast.Assign):
        return _literal_int(node.value) and any(
            isinstance(target, ast.Name) and target.id.startswith("EXIT_")
            for target in node.targets)
    return False


def exit_decisions(path: Path) -> list[str]:
    """Where a file chooses between exit codes: `_decides`, or a code (other than a plain
    pass) returned under an `if`."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if _decides(node):
            found.append(_where(path, node))
        elif isinstance(node, ast.If):
            found += [_where(path, inner) for stmt in (*node.body, *node.orelse)
                      for inner in ast.walk(stmt)
                      if isinstance(inner, ast.Return) and inner.value is not None
                      and _bare_code(inner.value)]
    return sorted(set(found))


def _bare_code(node: ast.AST) -> bool:
    """`ExitCode.X` or `int(ExitCode.X)` for an X other than PASS (an early pass when
    nothing is to be judged, `--fail-on-drop` not asked), or an `EXIT_*` name."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
            and node.func.id == "int" and node.args:
        node = node.args[0]
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
            and node.value.id == "ExitCode":
        return node.attr != "PASS"
    return isinstance(node, ast.Name) and node.id.startswith("EXIT_")


def test_commands_return_no_literal_code() -> None:
    found = [hit for path in COMMANDS for hit in literal_codes(path)]
    assert found == []


def test_exit_codes_are_decided_in_one_place() -> None:
    found = [hit for path in sorted(PACKAGE.rglob("*.py")) if path not in (HOME, ENUM)
             and str(path.relative_to(PACKAGE)) not in ALLOWED
             for hit in exit_decisions(path)]
    assert found == []


def test_the_finders_find_what_they_look_for(tmp_path: Path) -> None:
    """Each pattern the two tests refuse is found (so an empty list means none is there)."""
    bad = tmp_path / "bad.py"
    bad.write_text(
        "import sys\n"
        "EXIT_OWN = 6\n"
        "def a(x):\n    return 1\n"
        "def b(x):\n    sys.exit(2)\n"
        "def c(x):\n    return ExitCode.BELOW_FLOOR if x else ExitCode.PASS\n"
        "def d(x):\n    if x:\n        return ExitCode.NO_DIFFERENCE\n    return x\n"
        "def e(x):\n    return max(int(x), int(ExitCode.PASS))\n"
        "def f(x):\n    return x == ExitCode.ENGINE_ERROR\n"
        "def g(x):\n    if x:\n        return EXIT_OWN\n    return x\n", encoding="utf-8")
    assert [hit.rsplit(":", 1)[1] for hit in literal_codes(bad)] == ["4", "6"]
    assert sorted(int(hit.rsplit(":", 1)[1]) for hit in exit_decisions(bad)) == \
        [2, 8, 11, 14, 16, 19]
    good = tmp_path / "good.py"
    good.write_text(
        "def a(x):\n    if not x:\n        return int(ExitCode.PASS)\n"
        "    return check_exit(x)\n", encoding="utf-8")
    assert literal_codes(good) == [] and exit_decisions(good) == []
