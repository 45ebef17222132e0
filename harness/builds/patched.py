"""A built SGLang with patches applied: its installed package tree, copied and patched.

`--sglang sglang==0.5.23 --patch pr.diff` means "this release plus this PR", and a CPU
suite's `engine.test_patches` are the test-only changes that let a release run on this
host. Both are diffs in SGLang's repository layout (`python/sglang/...`). The installed
environment stays as it is (one environment per release, shared by every run of it):
its `sglang/` package folder is copied into `<cache>/patched/sglang-<key>/python/`, each
patch is applied there with `git apply` (the user's first, written against the release,
then the suite's), and the server runs with that folder first on its `PYTHONPATH`, so
`import sglang` reads the patched tree, and the audit reads that same tree. The key is
the base environment's identity and each patch's sha256, in order: a changed patch is a
new tree, an unchanged one is reused. Files a diff changes outside `python/sglang/`
(tests, docs, the kernel sources) are not part of the installed package; they are left
out and listed, and a diff that changes nothing inside it is an error.

An overlay (a local checkout on a CPU host, `overlay.py`) is the same tree with another
source: the checkout's own `sglang/`, snapshotted at its commit, in place of the
installed one (the release's dist-info still beside it), then the same patches.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.builds import gitrepo
from harness.builds.common import (
    bounded_lock,
    file_sha256,
    run_command,
    short_sha256,
    sweep_stale,
)
from harness.errors import BadInput, EngineError
from harness.files import cache_root

PACKAGE = "python/sglang"
NOTE = "harness-patched.json"
Source = Callable[[Path], Path]  # writes a package's source under a scratch folder; its parent
LAYOUT = 4  # of the patched tree (its dist-info beside it, its hash in the note); in the key


@dataclass(frozen=True)
class Patch:
    path: Path
    role: str  # "--patch" (the user's) or "engine.test_patches" (the suite's)

    @property
    def sha256(self) -> str:
        return file_sha256(self.path)


def tree_key(base: str, patches: Sequence[Patch]) -> str:
    text = json.dumps({"base": base, "patches": [p.sha256 for p in patches],
                       "layout": LAYOUT})
    return short_sha256(text)


def patched_tree(package_parent: Path, base: str, patches: Sequence[Patch],
                 digest: Callable[[Path], str], source: Source | None = None) -> Path:
    """The folder (to put first on PYTHONPATH) holding `sglang/` = the package under
    `package_parent` with `patches` applied in order; made once per key, under a lock.
    `digest` hashes the patched package folder (the build's `folder_sha256`), once.
    `source` (an overlay): the package is the one it writes instead (`base` names it),
    the dist-info still `package_parent`'s."""
    if not (package_parent / "sglang" / "__init__.py").is_file():
        raise EngineError(f"no sglang package in {package_parent} to patch")
    root = cache_root() / "patched"
    out = root / f"sglang-{tree_key(base, patches)}"
    if (out / NOTE).is_file():
        return out / "python"
    root.mkdir(parents=True, exist_ok=True)
    sweep_stale(root)
    with bounded_lock(Path(f"{out}.lock"), "patching sglang"):
        if (out / NOTE).is_file():
            return out / "python"
        staging = out.with_name(f"{out.name}.building-{os.getpid()}")
        scratch = out.with_name(f"{out.name}-source.building-{os.getpid()}")
        shutil.rmtree(staging, ignore_errors=True)
        try:
            parent = package_parent if source is None else source(scratch)
            if not (parent / "sglang" / "__init__.py").is_file():
                raise BadInput(f"no sglang package (sglang/__init__.py) in {parent}")
            shutil.copytree(parent / "sglang", staging / PACKAGE,
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
            compiled = [] if source is None else _compiled_from_release(
                package_parent / "sglang", staging / PACKAGE)
            # its metadata too: the version, and the pins the audit reads (transformers)
            for info in package_parent.glob("sglang-*.dist-info"):
                shutil.copytree(info, staging / "python" / info.name)
            applied = [_apply(staging, patch) for patch in patches]
            (staging / NOTE).write_text(json.dumps(
                {"base": base, "package_parent": str(package_parent),
                 "overlay": source is not None, "compiled_from_release": compiled,
                 "patches": applied,
                 "tree_sha256": digest(staging / PACKAGE)}, indent=2) + "\n")
            if out.exists():
                shutil.rmtree(out)
            staging.rename(out)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
            shutil.rmtree(scratch, ignore_errors=True)
    return out / "python"


COMPILED = ("*.so", "*.pyd")


def _compiled_from_release(release: Path, package: Path) -> list[str]:
    """An overlay's compiled extensions (SGLang 0.5.23 ships Rust ones under `srt/`): a
    git checkout holds their sources, not the built files, so those it lacks are the
    release's, copied to the same place (listed in the note). One the checkout has is
    kept."""
    copied = []
    for pattern in COMPILED:
        for built in sorted(release.rglob(pattern)):
            relative = built.relative_to(release)
            target = package / relative
            if "__pycache__" in relative.parts or target.exists():
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(built, target)
            copied.append(relative.as_posix())
    return copied


def tree_sha256(tree: Path) -> str:
    """`sha256:<hex>` of the patched package's files (as `folder_sha256` hashes a local
    source): what runs, so two trees with the same hash ran the same code."""
    note = json.loads((tree.parent / NOTE).read_text())
    return f"sha256:{note['tree_sha256']}"


def _apply(tree: Path, patch: Patch) -> dict[str, object]:
    """Apply one diff to the copied package (only its `python/sglang/` part)."""
    what = f"{patch.role} {patch.path}"
    # Outside any repository (even if the cache lies in one), paths are the patch's own.
    env = gitrepo.git_env({"GIT_CEILING_DIRECTORIES": str(tree.parent)})
    path = str(patch.path.resolve())
    every = _changed_files(tree, path, [], what, env)
    inside = _changed_files(tree, path, [f"--include={PACKAGE}/*"], what, env)
    if not inside:
        raise BadInput(f"{what}: it changes no file under {PACKAGE}/ (the installed "
                       f"package); it changes {', '.join(every) or 'nothing'}")
    command = ["git", "apply", f"--include={PACKAGE}/*", path]
    try:
        run_command([*command[:2], "--check", *command[2:]], f"checking {what}",
                    timeout_s=60, cwd=tree, env=env)
    except EngineError as error:  # written against another tree, or clashing with another
        raise BadInput(f"{what} does not apply to the installed sglang (after the patches "
                       f"before it): {error}") from None
    run_command(command, f"applying {what} to the installed sglang", timeout_s=60, cwd=tree,
                env=env)
    return {"role": patch.role, "path": str(patch.path), "sha256": patch.sha256,
            "files": inside, "left_out": sorted(set(every) - set(inside))}


def _changed_files(tree: Path, patch: str, include: list[str], what: str,
                   env: dict[str, str]) -> list[str]:
    out = run_command(["git", "apply", "--numstat", *include, patch], f"reading {what}",
                      timeout_s=60, cwd=tree, env=env)
    return [line.split("\t", 2)[2] for line in out.splitlines() if line.count("\t") >= 2]
