"""Run functions of a downloaded SGLang wheel without importing SGLang (no torch, no GPU).

A function is taken out of the wheel's source with `ast`, compiled under the wheel's own
file name and line numbers (so a traceback points into SGLang's code), and executed in a
namespace the caller fills with small stand-ins. Nothing is guessed: a function that reads
a global name, an import or a `self.` attribute that no stand-in provides is refused with a
message naming the file, the function and the names, so a release that changes what these
functions touch fails loudly instead of running against the wrong stand-in.
"""

from __future__ import annotations
import __future__

import ast
import builtins
import copy
import zipfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

from harness.audit.source import cached_archive, wheel_cache_dir

Node = TypeVar("Node", ast.ClassDef, ast.FunctionDef)
Function = ast.FunctionDef | ast.AsyncFunctionDef  # a coroutine method runs the same way
_KEPT_DECORATORS = {"property", "staticmethod"}
_BUILTINS = set(dir(builtins))


class OracleError(RuntimeError):
    """SGLang's code could not be found or bound; the message says where and why."""


class OracleUnavailable(OracleError):
    """No wheel of the asked version is cached (tests skip; the fake server refuses to start)."""


@lru_cache(maxsize=8)
def wheel_path(version: str) -> Path:
    """The cached wheel of `version` (the cache `nox -s tests` fills; never downloads)."""
    cache = wheel_cache_dir()
    archive = cached_archive(version, cache)
    if archive is None or not archive.name.endswith(".whl"):
        raise OracleUnavailable(
            f"no sglang {version} wheel in {cache} (set HARNESS_SGLANG_WHEELS, or run "
            f"`python -m harness.audit.source {cache} {version}` to fetch it)")
    return archive


@lru_cache(maxsize=8)
def _wheel(version: str) -> zipfile.ZipFile:
    """The wheel, opened once (reading its directory of thousands of entries is the slow part)."""
    return zipfile.ZipFile(wheel_path(version))


@lru_cache(maxsize=64)
def read_source(version: str, member: str) -> str | None:
    """The text of `member` (e.g. sglang/srt/managers/utils.py) in the wheel; None if absent."""
    try:
        return _wheel(version).read(member).decode("utf-8")
    except KeyError:
        return None


@dataclass(frozen=True)
class Source:
    """One module of one SGLang version, parsed."""

    version: str
    member: str
    tree: ast.Module
    origin: str  # the wheel it was read from

    @property
    def filename(self) -> str:  # what tracebacks through the extracted code show
        return f"{self.origin}!{self.member}"

    @property
    def where(self) -> str:
        return f"sglang {self.version} {self.member}"

    def cls(self, name: str) -> ast.ClassDef:
        for node in self.tree.body:
            if isinstance(node, ast.ClassDef) and node.name == name:
                return node
        raise OracleError(f"{self.where} defines no class {name}")

    def method(self, class_name: str, name: str) -> ast.FunctionDef:
        found = methods(self.cls(class_name)).get(name)
        if found is None:
            raise OracleError(f"{self.where}: class {class_name} has no method {name}")
        return found


@lru_cache(maxsize=64)
def source(version: str, member: str) -> Source:
    text = read_source(version, member)
    if text is None:
        raise OracleError(f"sglang {version} wheel has no {member}")
    return Source(version, member, ast.parse(text, filename=member), str(wheel_path(version)))


def has_member(version: str, member: str) -> bool:
    return read_source(version, member) is not None


def module_classes(src: Source, names: Iterable[str]) -> list[ast.ClassDef]:
    """Module-level classes of `src` by name, in source order."""
    return _module_level(src, ast.ClassDef, "class", names)


def module_functions(src: Source, names: Iterable[str]) -> list[ast.FunctionDef]:
    return _module_level(src, ast.FunctionDef, "function", names)


def _module_level(src: Source, kind: type[Node], what: str, names: Iterable[str]) -> list[Node]:
    wanted = set(names)
    found = [node for node in src.tree.body if isinstance(node, kind) and node.name in wanted]
    if len(found) != len(wanted):
        absent = wanted - {node.name for node in found}
        raise OracleError(f"{src.where} defines no {what} {', '.join(sorted(absent))}")
    return found


def class_defaults(cls: ast.ClassDef) -> dict[str, Any]:
    """Class-level `name: type = <literal>` fields (a dataclass's defaults)."""
    values = {}
    for stmt in cls.body:
        if (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)
                and stmt.value is not None):
            try:
                values[stmt.target.id] = ast.literal_eval(stmt.value)
            except ValueError:
                continue
    return values


def methods(cls: ast.ClassDef) -> dict[str, ast.FunctionDef]:
    return {node.name: node for node in cls.body if isinstance(node, ast.FunctionDef)}


def self_attributes(func: ast.FunctionDef) -> set[str]:
    """Names `n` such that the function reads or calls `self.n`."""
    names = set()
    for node in ast.walk(func):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id == "self"):
            names.add(node.attr)
    return names


def closure(cls: ast.ClassDef, roots: Iterable[str], stop: Iterable[str] = ()
            ) -> list[ast.FunctionDef]:
    """`roots` and every method of `cls` they reach through `self.name` (not past `stop`)."""
    table, stop = methods(cls), set(stop)
    todo, seen = list(roots), set()
    while todo:
        name = todo.pop()
        if name in seen or name in stop:
            continue
        if name not in table:
            raise OracleError(f"class {cls.name} has no method {name}")
        seen.add(name)
        todo += [n for n in self_attributes(table[name]) if n in table]
    return [table[name] for name in sorted(seen)]


def _annotation_nodes(func: Function) -> set[int]:
    """ids of nodes inside annotations (never evaluated: the wheel's modules and this
    compilation both use `from __future__ import annotations`)."""
    roots: list[ast.AST] = []
    for node in ast.walk(func):
        if isinstance(node, ast.arg) and node.annotation is not None:
            roots.append(node.annotation)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.returns:
            roots.append(node.returns)
        elif isinstance(node, ast.AnnAssign):
            roots.append(node.annotation)
    return {id(child) for root in roots for child in ast.walk(root)}


def free_names(func: Function) -> set[str]:
    """Global names the function reads (no scoping subtleties: enough for these functions)."""
    skip = _annotation_nodes(func)
    bound: set[str] = set()
    loaded: set[str] = set()
    for node in ast.walk(func):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Name):
            (loaded if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.alias):
            bound.add((node.asname or node.name).split(".")[0])
        elif (isinstance(node, (ast.ExceptHandler, ast.FunctionDef, ast.AsyncFunctionDef,
                                ast.ClassDef))
              and node.name and node is not func):
            bound.add(node.name)
    return loaded - bound - _BUILTINS


def _strip_decorators(func: Function) -> Function:
    kept = []
    for decorator in func.decorator_list:
        if isinstance(decorator, ast.Name) and decorator.id in _KEPT_DECORATORS:
            kept.append(decorator)
    func.decorator_list = kept
    return func


def _importer(modules: Mapping[str, ModuleType], where: str) -> Callable[..., ModuleType]:
    """`__import__` for the extracted code: stand-in modules only (never the real SGLang)."""
    def fake_import(name: str, globals_: Any = None, locals_: Any = None,
                    fromlist: Any = (), level: int = 0) -> ModuleType:
        if name in modules:
            return modules[name]
        if name in ("re", "logging", "time", "math", "http"):
            return builtins.__import__(name, globals_, locals_, fromlist, level)
        raise OracleError(f"{where}: the extracted code imports {name}, which the oracle "
                          "does not provide")

    return fake_import


def _unit_free_names(node: Function | ast.ClassDef) -> set[str]:
    if isinstance(node, Function):
        return free_names(node)
    names = {base.id for base in node.bases if isinstance(base, ast.Name)}
    for item in node.body:
        if isinstance(item, Function):
            names |= free_names(item)
    return names - _BUILTINS


def compile_functions(src: Source, funcs: list[Function] | list[ast.ClassDef],
                      namespace: dict[str, Any],
                      modules: Mapping[str, ModuleType] | None = None) -> dict[str, Any]:
    """Compile module-level `funcs` (or classes) into `namespace`; refuse unprovided names."""
    allowed = set(namespace) | {func.name for func in funcs}
    for func in funcs:
        missing = _unit_free_names(func) - allowed
        if missing:
            raise OracleError(
                f"{src.where}: {func.name} (line {func.lineno}) uses {', '.join(sorted(missing))}, "
                "which the oracle does not provide; this release changed the code it runs")
    body = [_strip_decorators(copy.deepcopy(func)) if isinstance(func, Function)
            else func for func in funcs]
    module = ast.Module(body=body, type_ignores=[])
    code = compile(module, src.filename, "exec",
                   flags=__future__.annotations.compiler_flag, dont_inherit=True)
    namespace["__builtins__"] = {**builtins.__dict__,
                                 "__import__": _importer(modules or {}, src.where)}
    exec(code, namespace)
    return {func.name: namespace[func.name] for func in funcs}


def build_class(src: Source, class_name: str, roots: Iterable[str],
                namespace: dict[str, Any], *, extra: Iterable[ast.FunctionDef] = (),
                stop: Iterable[str] = (), modules: Mapping[str, ModuleType] | None = None,
                replace: Mapping[str, Callable[..., Any]] | None = None) -> type:
    """A class holding SGLang's `roots` methods of `class_name` and the methods they call.

    Methods named in `stop` are reachable but replaced by ones that raise (branches the
    oracle never takes); those in `replace` by the given stand-ins (work with no bearing
    on the figures, such as a grammar FSM or Prometheus snapshots). Instances are made
    with `instance`, which checks that every `self.` attribute the methods read is given.
    """
    cls = src.cls(class_name)
    replace, extra = dict(replace or {}), list(extra)
    own = {func.name for func in extra}
    table = methods(cls)
    reached = {name for func in extra for name in self_attributes(func) if name in table}
    funcs = closure(cls, {*roots, *reached} - own, set(stop) | set(replace) | own) + extra
    compiled = compile_functions(src, funcs, namespace, modules)
    for name in stop:
        compiled[name] = _unreachable(src, class_name, name)
    compiled.update(replace)
    members = set(compiled)
    needed = set().union(*(self_attributes(f) for f in funcs)) - members
    compiled["_oracle_needs"] = frozenset(needed)
    compiled["_oracle_where"] = f"{src.where}: {class_name}"
    return type(f"{class_name}_sglang_{src.version.replace('.', '_')}", (), compiled)


def _unreachable(src: Source, class_name: str, name: str) -> Callable[..., Any]:
    def call(*_args: Any, **_kwargs: Any) -> Any:
        raise OracleError(f"{src.where}: {class_name}.{name} was called; the oracle "
                          "expected that branch not to run")

    return call


def instance(cls: type, **attributes: Any) -> Any:
    """An instance of a `build_class` class; every attribute its methods read must be given."""
    missing = set(cls._oracle_needs) - set(attributes)  # type: ignore[attr-defined]
    if missing:
        raise OracleError(f"{cls._oracle_where} reads self.{', self.'.join(sorted(missing))}, "  # type: ignore[attr-defined]
                          "which the oracle does not set; this release changed the code it runs")
    obj = cls.__new__(cls)
    obj.__dict__.update(attributes)
    return obj


def literal_assignments(func: ast.FunctionDef) -> dict[str, Any]:
    """`self.name = <literal>` statements at the top of `func`'s body, as a dict."""
    values: dict[str, Any] = {}
    for stmt in func.body:
        targets = (stmt.targets if isinstance(stmt, ast.Assign)
                   else [stmt.target] if isinstance(stmt, ast.AnnAssign) and stmt.value else [])
        for target in targets:
            if (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)
                    and target.value.id == "self"):
                try:
                    values[target.attr] = ast.literal_eval(stmt.value)  # type: ignore[arg-type]
                except ValueError:
                    continue
    return values


def sliced(func: ast.FunctionDef, keep: Callable[[ast.stmt], bool], name: str,
           params: Iterable[str], prelude: str = "", epilogue: str = "") -> ast.FunctionDef:
    """A new function `name(params)` made of `func`'s top-level statements that `keep` picks."""
    kept = [stmt for stmt in func.body if keep(stmt)]
    if not kept:
        raise OracleError(f"{func.name} (line {func.lineno}): none of its statements is the "
                          "part the oracle runs")
    head = ast.parse(f"def {name}({', '.join(params)}):\n    pass").body[0]
    assert isinstance(head, ast.FunctionDef)
    before = ast.parse(prelude).body if prelude else []
    after = ast.parse(epilogue).body if epilogue else []
    for stmt in (*before, *after):
        ast.copy_location(stmt, kept[0])
        ast.fix_missing_locations(stmt)
    head.body = [*before, *kept, *after]
    ast.copy_location(head, func)
    ast.fix_missing_locations(head)
    return head


def loaded_names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def assigned_names(stmt: ast.stmt) -> set[str]:
    targets = stmt.targets if isinstance(stmt, ast.Assign) else (
        [stmt.target] if isinstance(stmt, (ast.AnnAssign, ast.AugAssign)) else [])
    return {n.id for t in targets for n in ast.walk(t)
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}


def with_dependencies(func: ast.FunctionDef, pick: Callable[[ast.stmt], bool]
                      ) -> Callable[[ast.stmt], bool]:
    """`pick`, plus the earlier top-level assignments of the names the picked statements read."""
    chosen = {id(stmt) for stmt in func.body if pick(stmt)}
    changed = True
    while changed:
        changed = False
        needed = set().union(*(loaded_names(s) for s in func.body if id(s) in chosen))
        for stmt in func.body:
            if id(stmt) not in chosen and assigned_names(stmt) & needed:
                chosen.add(id(stmt))
                changed = True
    return lambda stmt: id(stmt) in chosen


def mentions(node: ast.AST, text: str) -> bool:
    """Whether `text` occurs in the node's source (as `ast.unparse` writes it)."""
    return text in ast.unparse(node)


def stores_key(node: ast.AST, key: str) -> ast.Subscript | None:
    """The `x[key] = ...` subscript target inside `node`, if any."""
    for child in ast.walk(node):
        if (isinstance(child, ast.Subscript) and isinstance(child.ctx, ast.Store)
                and isinstance(child.slice, ast.Constant) and child.slice.value == key):
            return child
    return None
