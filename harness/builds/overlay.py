"""A local SGLang checkout on a CPU host: its package over the CPU environment of its release.

A checkout's `python/pyproject.toml` pins a CUDA torch and CUDA-only kernel libraries, as
a release's wheel does; `pip install` of it cannot serve on a CPU. So on a CPU host a
local checkout (`--sglang PATH` or `PATH@REF`) is not installed: the release its
`python/sglang/version.py` names (`sglang==<__version__>`) gets its CPU environment
(the CPU recipe of `sglang_cpu`, the same cache entry as `--sglang sglang==<version>`),
and the checkout's `python/sglang`, snapshotted at the commit, goes first on the server's
`PYTHONPATH` through the patched-tree mechanism (`patched.py`), with the user's `--patch`
and the suite's test patches applied in the usual order. That is a faithful build only
when the checkout needs what the release installed: when the checkout has a
`pyproject.toml`, its `[project] dependencies` for this interpreter, less the CUDA-only
ones, must equal the release's kept dependencies, else the build is refused naming the
difference. This module holds the reading and the checks; `sglang_env` resolves and
installs.
"""

from __future__ import annotations

import ast
import tomllib
from collections.abc import Callable, Sequence

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from harness.builds.sglang_cpu import applicable, split_cuda_only
from harness.errors import BadInput, EngineError

METHOD = "overlay"
VERSION_FILE = "sglang/version.py"
GENERATED_VERSION_FILE = "sglang/_version.py"  # setuptools-scm's, in a wheel
PYPROJECT = "pyproject.toml"
Reader = Callable[[str], "str | None"]  # a file's text in the tree being built, or None


def package_folder(read: Reader, where: str) -> str:
    """The folder (relative to the checkout) holding `sglang/version.py`: SGLang's
    repository keeps its package under `python/`; a folder that is the package's own
    parent will do too."""
    for folder in ("python", ""):
        if read("/".join(filter(None, [folder, VERSION_FILE]))) is not None:
            return folder
    raise BadInput(f"--sglang {where}: no python/{VERSION_FILE} in it (a local SGLang "
                   "checkout on a CPU host is served over its release's environment, "
                   "named by that file's __version__)")


def read_version(text: str, where: str, file: str = VERSION_FILE) -> str | None:
    """`__version__` of a `version.py` when it is a string literal (older SGLang writes
    it so), checked to be a PEP 440 version; None when the file takes it from elsewhere
    (SGLang 0.5.x: `from sglang._version import __version__`, made by setuptools-scm)."""
    what = f"--sglang {where}: {file}"
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError) as error:
        raise BadInput(f"{what} does not parse: {error}") from None
    found = None
    for node in tree.body:
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        if any(isinstance(t, ast.Name) and t.id == "__version__" for t in targets):
            if not (isinstance(value, ast.Constant) and isinstance(value.value, str)):
                raise BadInput(f"{what}: __version__ is not a string literal "
                               f"({ast.unparse(value)})")
            found = value.value
    if found is None:
        return None
    try:
        Version(found)
    except InvalidVersion:
        raise BadInput(f"{what}: __version__ {found!r} is not a version") from None
    return found


def tree_version(read: Reader, package: str, where: str,
                 nearest_tag: Callable[[], str | None]) -> tuple[str, str]:
    """(the release a tree names, where that was read: `sglang/version.py`,
    `sglang/_version.py` or `tag v<version>`): `sglang/version.py`'s literal
    `__version__`, else the `sglang/_version.py` setuptools-scm wrote (a tree made from
    a wheel has it), else the nearest `v<version>` tag of the commit (what setuptools-scm
    counts from in a git checkout)."""
    def path(name: str) -> str:
        return "/".join(filter(None, [package, name]))

    text = read(path(VERSION_FILE))
    if text is None:
        raise BadInput(f"--sglang {where}: no {path(VERSION_FILE)} in it")
    version = read_version(text, where, path(VERSION_FILE))
    if version is not None:
        return version, VERSION_FILE
    generated = read(path(GENERATED_VERSION_FILE))
    if generated is not None:
        version = read_version(generated, where, path(GENERATED_VERSION_FILE))
        if version is not None:
            return version, GENERATED_VERSION_FILE
    tag = nearest_tag()
    if tag is not None:
        version = tag.removeprefix("v")

        try:
            Version(version)
        except InvalidVersion:
            raise BadInput(f"--sglang {where}: its nearest tag {tag!r} is not a "
                           "version") from None
        return version, f"tag {tag}"
    raise BadInput(f"--sglang {where}: {path(VERSION_FILE)} sets no literal __version__, "
                   f"there is no {path(GENERATED_VERSION_FILE)} and no v<version> tag "
                   "reaches the commit: cannot tell which release's environment to use")


def project_dependencies(text: str, where: str) -> tuple[str, ...]:
    """`[project] dependencies` of a pyproject.toml, as written."""
    what = f"--sglang {where}: python/{PYPROJECT}"
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise BadInput(f"{what} does not parse: {error}") from None
    project = data.get("project")
    dependencies = project.get("dependencies", []) if isinstance(project, dict) else []
    if "dependencies" in (project.get("dynamic", []) if isinstance(project, dict) else []):
        raise BadInput(f"{what}: its dependencies are dynamic; the overlay cannot compare "
                       "them with the release's")
    if not isinstance(dependencies, list) or not all(isinstance(d, str)
                                                     for d in dependencies):
        raise BadInput(f"{what}: [project] dependencies is not a list of strings")
    return tuple(dependencies)


def dependency_difference(checkout: Sequence[str], release_kept: Sequence[str],
                          where: str) -> tuple[list[str], list[str]]:
    """(only the checkout's, only the release's): the checkout's dependencies that apply
    here, less the CUDA-only ones (the CPU recipe's rule), against what the release's
    CPU environment kept. Requirements compare by canonical name, extras, specifier and
    URL, not by spelling."""
    try:
        kept, _ = split_cuda_only(applicable(list(checkout)))
    except InvalidRequirement as error:
        raise BadInput(f"--sglang {where}: python/{PYPROJECT}: {error}") from None
    ours = {_canonical(line): line for line in kept}
    theirs = {_canonical(line): line for line in release_kept}
    return ([ours[k] for k in sorted(set(ours) - set(theirs))],
            [theirs[k] for k in sorted(set(theirs) - set(ours))])


def check_dependencies(checkout: Sequence[str] | None, release_kept: Sequence[str],
                       where: str, release: str) -> None:
    """Refuse an overlay whose checkout needs something its release's environment lacks
    (None: the checkout has no pyproject.toml, nothing to compare)."""
    if checkout is None:
        return
    only_checkout, only_release = dependency_difference(checkout, release_kept, where)
    if not only_checkout and not only_release:
        return
    parts = []
    if only_checkout:
        parts.append(f"the checkout's python/{PYPROJECT} has {', '.join(only_checkout)}")
    if only_release:
        parts.append(f"{release}'s CPU environment has {', '.join(only_release)}")
    raise BadInput(f"--sglang {where}: its dependencies differ from {release}'s (after "
                   f"the CUDA-only rule): {'; '.join(parts)}. On a CPU host a checkout is "
                   f"served over its release's environment, so they must be the same")


def _canonical(line: str) -> str:
    requirement = Requirement(line)
    requirement.marker = None
    return "|".join([canonicalize_name(requirement.name),
                     ",".join(sorted(canonicalize_name(e) for e in requirement.extras)),
                     ",".join(sorted(str(s) for s in requirement.specifier)),
                     requirement.url or ""])


NO_RELEASE = ("No matching distribution found", "Could not find a version that satisfies")


def release_error(error: EngineError, version: str, where: str) -> Exception:
    """The error to raise when the release's environment could not be built: pip found
    no such release is bad input naming the version file; anything else stays as it is."""
    if any(text in error.message for text in NO_RELEASE):
        return BadInput(f"--sglang {where}: its {VERSION_FILE} says {version}, and "
                        f"sglang=={version} has no release pip can download; a local "
                        "checkout on a CPU host is served over the CPU environment of the "
                        f"release it names ({error.message.strip()[-300:]})")
    return error
