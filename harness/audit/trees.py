"""Read-only views of one SGLang tree by package path (`sglang/...`): a folder, a wheel or
sdist (member by member, without unpacking), or one commit of a git repository."""

from __future__ import annotations

import subprocess
import tarfile
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from harness.audit.wheels import SGLangSourceError
from harness.errors import BadInput

if TYPE_CHECKING:
    import subprocess
    import zipfile


class Tree(Protocol):
    """Read-only access to the files of one SGLang tree, by package path (`sglang/...`)."""

    def read(self, path: str) -> str | None: ...

    def grep(self, prefix: str, needle: str) -> list[str]: ...


class FolderTree:
    def __init__(self, parent: Path) -> None:
        self.parent = parent

    def read(self, path: str) -> str | None:
        file = self.parent / path
        return file.read_text(encoding="utf-8") if file.is_file() else None

    def grep(self, prefix: str, needle: str) -> list[str]:
        return sorted(str(f.relative_to(self.parent)) for f in (self.parent / prefix).glob("*.py")
                      if needle in f.read_text(encoding="utf-8", errors="replace"))


class ArchiveTree:
    """A wheel or sdist, read member by member without unpacking."""

    def __init__(self, archive: Path) -> None:
        self.archive = archive
        self.is_zip = archive.name.endswith((".whl", ".zip"))
        self._zip: zipfile.ZipFile | None = None
        self._names = self._list()

    def _list(self) -> dict[str, str]:
        try:
            if self.is_zip:
                self._zip = zipfile.ZipFile(self.archive)  # kept open: one index read
                members = self._zip.namelist()
            else:
                with tarfile.open(self.archive) as bundle:
                    members = bundle.getnames()
        except (zipfile.BadZipFile, tarfile.TarError, OSError) as error:
            raise SGLangSourceError(f"cannot read archive {self.archive}: {error}") from error
        names: dict[str, str] = {}
        for member in sorted(members, key=len):  # sdists add a `sglang-X/` prefix
            index = member.find("sglang/")
            key = member[index:] if index >= 0 else member
            names.setdefault(key, member)
            if member.endswith(("dist-info/METADATA", "PKG-INFO", "pyproject.toml")):
                names.setdefault(member.rsplit("/", 1)[-1], member)
        return names

    def read(self, path: str) -> str | None:
        member = self._names.get(path)
        if member is None:
            return None
        try:
            if self._zip is not None:
                return self._zip.read(member).decode("utf-8")
            with tarfile.open(self.archive) as bundle:
                extracted = bundle.extractfile(member)
                return extracted.read().decode("utf-8") if extracted else None
        except (zipfile.BadZipFile, tarfile.TarError, OSError, UnicodeDecodeError) as error:
            raise SGLangSourceError(f"cannot read {member} in {self.archive}: {error}") from error

    def grep(self, prefix: str, needle: str) -> list[str]:
        paths = [p for p in self._names if p.startswith(prefix) and p.endswith(".py")]
        return [p for p in paths if needle in (self.read(p) or "")]


class GitTree:
    """One commit of a repository whose package lives under `python/` (SGLang's layout)."""

    def __init__(self, repo: Path, commit: str, prefix: str = "python/") -> None:
        self.repo, self.commit, self.prefix = repo, commit, prefix

    def _git(self, *args: str) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(["git", "-C", str(self.repo), *args], capture_output=True,
                              check=False)  # fmt: skip

    def read(self, path: str) -> str | None:
        result = self._git("show", f"{self.commit}:{self.prefix}{path}")
        return result.stdout.decode("utf-8", errors="replace") if result.returncode == 0 else None

    def grep(self, prefix: str, needle: str) -> list[str]:
        result = self._git("grep", "-l", "-F", needle, self.commit, "--", self.prefix + prefix)
        lines = result.stdout.decode("utf-8", errors="replace").splitlines()
        return [line.split(":", 1)[1].removeprefix(self.prefix) for line in lines if ":" in line]


class LazyArchiveTree:
    """Opens the archive only when something beyond the cached extract is needed."""

    def __init__(self, archive: Path) -> None:
        self.archive = archive
        self._tree: ArchiveTree | None = None

    def _open(self) -> ArchiveTree:
        if self._tree is None:
            self._tree = ArchiveTree(self.archive)
        return self._tree

    def read(self, path: str) -> str | None:
        return self._open().read(path)

    def grep(self, prefix: str, needle: str) -> list[str]:
        return self._open().grep(prefix, needle)


class OverlayTree:
    """A tree with some files replaced (a patch applied to them): those read from
    `changed` (None: deleted by the patch), every other file from `base`."""

    def __init__(self, base: Tree, changed: dict[str, str | None]) -> None:
        self.base, self.changed = base, changed

    def read(self, path: str) -> str | None:
        if path in self.changed:
            return self.changed[path]
        return self.base.read(path)

    def grep(self, prefix: str, needle: str) -> list[str]:
        found = {p for p in self.base.grep(prefix, needle) if p not in self.changed}
        found |= {p for p, text in self.changed.items()
                  if p.startswith(prefix) and text is not None and needle in text}
        return sorted(found)


def run_git(repo: Path, args: Sequence[str], timeout_s: float, error: type[BadInput]
            ) -> subprocess.CompletedProcess[str]:
    """`git -C repo ARGS` (text); `error` naming the command where git does not run or does
    not finish in `timeout_s`."""
    try:
        return subprocess.run(["git", "-C", str(repo), *args], capture_output=True,
                              text=True, timeout=timeout_s, check=False)  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as failure:
        raise error(f"git {' '.join(args)} in {repo}: {failure}") from None


def resolve_ref(repo: Path, ref: str) -> tuple[str, str]:
    """(sha, subject) of `ref` in a local git repository (`REPO@REF`)."""
    def git(*args: str) -> str:
        done = run_git(repo, args, 60, SGLangSourceError)
        if done.returncode != 0:
            raise SGLangSourceError(f"{repo}@{ref}: {done.stderr.strip() or 'no such commit'}")
        return done.stdout.strip()

    sha = git("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    return sha, git("log", "-1", "--format=%s", sha)
