"""The one git helper: commits, the identity of a working tree, refs of a remote, snapshots.

The identity of a working tree is the git tree id of everything `git add -A` would
commit (tracked changes and untracked, non-ignored files), computed with a temporary
index and a temporary object folder: the checkout and its repository are only read.
A snapshot is that same tree written out, so what is installed is what was hashed.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from harness.builds.common import GIT_TIMEOUT_S, run_command
from harness.errors import BadInput, EngineError

FULL_SHA = re.compile(r"^[0-9a-f]{40}([0-9a-f]{24})?$")
SHORT_SHA = re.compile(r"^[0-9a-f]{7,39}$")
# Never wait for a password or a host-key question: fail with git's message instead.
_QUIET = {"GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "", "SSH_ASKPASS": "",
          "GCM_INTERACTIVE": "never"}


def git_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = {**os.environ, **_QUIET, **(extra or {})}
    env.setdefault("GIT_SSH_COMMAND", "ssh -o BatchMode=yes")
    return env


def git(args: list[str], cwd: Path | None, what: str, *, env: Mapping[str, str] | None = None,
        timeout_s: float = GIT_TIMEOUT_S) -> str:
    if shutil.which("git") is None:
        raise EngineError(f"{what}: the git executable is not installed")
    return run_command(["git", *args], what, timeout_s=timeout_s, cwd=cwd, env=git_env(env))


def toplevel(path: Path) -> Path | None:
    """The root of the git work tree holding `path`, or None outside one."""
    if shutil.which("git") is None or not path.exists():
        return None
    try:
        out = git(["rev-parse", "--show-toplevel"], path, f"git rev-parse in {path}")
    except EngineError:
        return None
    return Path(out.strip()) if out.strip() else None


def rev_parse(repo: Path, ref: str) -> str:
    """The commit a ref names in a local repository (BadInput if it names none)."""
    try:
        return git(["rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}"],
                   repo, f"resolving {ref!r} in {repo}").strip()
    except EngineError:
        raise BadInput(f"{repo}: {ref!r} is not a commit, branch or tag there") from None


@dataclass(frozen=True)
class TreeState:
    """A checkout's identity: HEAD's commit, the tree id of its working state, dirty or not."""

    root: Path
    commit: str | None  # None in a repository without commits
    tree: str
    dirty: bool


def head_state(path: Path, *, exact: bool = False) -> tuple[str | None, bool | None]:
    """(HEAD commit, uncommitted changes to tracked files?) of a checkout, or (None, None).
    Cheap (no hashing of untracked files). `exact`: only when `path` is the checkout's
    root (an installed package inside someone else's repository has no commit)."""
    root = toplevel(path)
    if root is None or (exact and root.resolve() != path.resolve()):
        return None, None
    try:
        sha = git(["rev-parse", "--verify", "HEAD"], root, "git rev-parse HEAD").strip()
        status = git(["status", "--porcelain", "--untracked-files=no"], root, "git status")
    except EngineError:
        return None, None
    return sha, bool(status.strip())


@contextlib.contextmanager
def _scratch(root: Path) -> Iterator[dict[str, str]]:
    """Environment for git commands that write a temporary index and objects only."""
    objects = git(["rev-parse", "--path-format=absolute", "--git-path", "objects"], root,
                  "locating the object folder").strip()
    index = git(["rev-parse", "--path-format=absolute", "--git-path", "index"], root,
                "locating the index").strip()
    with tempfile.TemporaryDirectory(prefix="harness-git-") as scratch:
        (Path(scratch) / "objects").mkdir()
        if Path(index).is_file():  # reuse its stat cache: only changed files are re-hashed
            shutil.copy2(index, Path(scratch) / "index")  # its mtime too: racy-git checks
        alternates = os.pathsep.join(filter(None, [objects,
                                                   os.environ.get("GIT_ALTERNATE_OBJECT_DIRECTORIES")]))
        yield {"GIT_INDEX_FILE": str(Path(scratch) / "index"),
               "GIT_OBJECT_DIRECTORY": str(Path(scratch) / "objects"),
               "GIT_ALTERNATE_OBJECT_DIRECTORIES": alternates}


def _stage_all(root: Path, env: dict[str, str]) -> str:
    try:
        git(["add", "-A", "."], root, f"hashing the working tree of {root}", env=env)
    except EngineError:  # e.g. a split index that does not copy: start from an empty one
        Path(env["GIT_INDEX_FILE"]).unlink(missing_ok=True)
        git(["add", "-A", "."], root, f"hashing the working tree of {root}", env=env)
    return git(["write-tree"], root, "git write-tree", env=env).strip()


def _head(root: Path) -> tuple[str | None, str | None]:
    try:
        commit = git(["rev-parse", "--verify", "HEAD^{commit}"], root, "git rev-parse").strip()
        tree = git(["rev-parse", "--verify", "HEAD^{tree}"], root, "git rev-parse").strip()
    except EngineError:
        return None, None
    return commit, tree


def working_state(path: Path, snapshot_to: Path | None = None) -> TreeState:
    """The identity of a checkout's working tree; with `snapshot_to`, also its files,
    written there from the very tree that was hashed."""
    root = toplevel(path)
    if root is None:
        raise BadInput(f"{path} is not in a git checkout")
    commit, head_tree = _head(root)
    with _scratch(root) as env:
        tree = _stage_all(root, env)
        if snapshot_to is not None:
            _checkout_index(root, env, snapshot_to)
    return TreeState(root, commit, tree, dirty=tree != head_tree)


def commit_state(repo: Path, ref: str, snapshot_to: Path | None = None) -> TreeState:
    """The identity of a commit of a local repository; with `snapshot_to`, its files."""
    root = toplevel(repo)
    if root is None:
        raise BadInput(f"{repo} is not in a git checkout")
    commit = rev_parse(root, ref)
    tree = git(["rev-parse", f"{commit}^{{tree}}"], root, "git rev-parse").strip()
    if snapshot_to is not None:
        with _scratch(root) as env:
            git(["read-tree", commit], root, f"reading {commit[:12]}", env=env)
            _checkout_index(root, env, snapshot_to)
    return TreeState(root, commit, tree, dirty=False)


def _checkout_index(root: Path, env: dict[str, str], dest: Path) -> None:
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    git(["checkout-index", "--all", "--force", f"--prefix={dest}{os.sep}"], root,
        f"writing a snapshot of {root} to {dest}", env=env)


def show_file(repo: Path, commit: str, name: str) -> str | None:
    """A file's text at a commit, or None when the commit has no such file."""
    try:
        return git(["show", f"{commit}:{name}"], repo, f"reading {name} at {commit[:12]}")
    except EngineError:
        return None


def nearest_tag(repo: Path, commit: str) -> str | None:
    """The nearest `v<digit>...` tag reachable from a commit (setuptools-scm's base), or None."""
    try:
        out = git(["describe", "--tags", "--abbrev=0", "--match", "v[0-9]*", commit], repo,
                  f"git describe {commit[:12]}")
    except EngineError:
        return None
    return out.strip() or None


def ls_remote(url: str, ref: str | None) -> str | None:
    """The commit a branch, tag or HEAD of a remote repository names now (None: no such ref)."""
    wanted = ref or "HEAD"
    out = git(["ls-remote", "--", url, wanted, f"{wanted}^{{}}"], None,
              f"git ls-remote {url} {wanted}")  # redacted where it is reported
    refs = {}
    for line in out.splitlines():
        sha, _, name = line.partition("\t")
        refs[name.strip()] = sha.strip()
    for name in (f"refs/tags/{wanted}^{{}}", f"refs/heads/{wanted}", f"refs/tags/{wanted}",
                 wanted):
        if name in refs:
            return refs[name]
    return None


@dataclass(frozen=True)
class Commit:
    sha: str
    subject: str
    author_date: str  # ISO 8601


def commits_between(repo: Path, good: str, bad: str, *, first_parent: bool = True,
                    paths: tuple[str, ...] = ()) -> list[Commit]:
    """Commits after `good` up to and including `bad`, oldest first (what a bisect visits);
    `paths` keeps only commits touching them."""
    args = ["log", "--reverse", "--format=%H%x00%aI%x00%s",
            *(["--first-parent"] if first_parent else []),
            f"{rev_parse(repo, good)}..{rev_parse(repo, bad)}", "--", *paths]
    commits = []
    for line in git(args, repo, f"listing commits {good}..{bad} in {repo}").splitlines():
        sha, date, subject = line.split("\0", 2)
        commits.append(Commit(sha, subject, date))
    return commits
