"""`--bisect GOOD BAD --repo PATH`: the first commit whose table differs from GOOD's.

Walks the history of a local SGLang checkout from GOOD to BAD (`git rev-list --reverse
--ancestry-path`), keeping only commits that touch the files the audit reads (the resolver
files, the transformers patches, the HF config parser, the pyproject pin), evaluates each
with the same machinery as a release (audit/evaluate.py), and names the first commit whose
table (or error) differs from GOOD's. Every candidate is evaluated, not a binary search:
a resolver can flip and flip back, and a batch of commits costs one worker per
(transformers pin, SGLang patches), so the first difference is exact.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from harness.audit.evaluate import VersionResult, evaluate_sources
from harness.audit.extract import LOADER_COMMON, LOADER_FILE, RESOLVER_FILES
from harness.audit.source import PATCHES_FILE, commit_source
from harness.audit.table import describe_change, render_table, signature
from harness.audit.trees import run_git
from harness.errors import BadInput

if TYPE_CHECKING:
    from rich.console import Console


class BisectError(BadInput):
    """A repository or ref that cannot be walked (exit 2); the message names which."""


@dataclass(frozen=True)
class BisectResult:
    good: VersionResult
    bad: VersionResult
    candidates: list[VersionResult]  # commits touching the resolver files, oldest first
    first: VersionResult | None  # the first whose table differs from GOOD's
    before: VersionResult | None  # the table just before it (equal to GOOD's)

    def to_dict(self) -> dict[str, object]:
        return {
            "good": self.good.to_dict(),
            "bad": self.bad.to_dict(),
            "candidates": [{"commit": r.source.commit, "subject": r.source.subject,
                            "same_as_good": signature(r) == signature(self.good)}
                           for r in self.candidates],
            "first_different": None if self.first is None else self.first.to_dict(),
            "before": None if self.before is None else self.before.to_dict(),
            "change": None if self.first is None or self.before is None
            else describe_change(self.before, self.first),
        }


def _git(repo: Path, *args: str) -> str:
    result = run_git(repo, args, 120, BisectError)
    if result.returncode != 0:
        raise BisectError(f"git {' '.join(args)} in {repo}: {result.stderr.strip()}")
    return result.stdout


def _commit(repo: Path, ref: str) -> tuple[str, str]:
    try:
        sha = _git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}").strip()
    except BisectError:
        raise BisectError(f"{repo} has no commit {ref!r}") from None
    return sha, _git(repo, "log", "-1", "--format=%s", sha).strip()


def resolver_paths(repo: Path, commit: str) -> list[str]:
    """The paths whose changes can change the table, as this repository lays them out
    (SGLang keeps its package in python/): the resolver files, SGLang's transformers patches
    and HF config parser, and the pyproject that pins transformers."""
    listed = _git(repo, "ls-tree", "-r", "--name-only", commit).splitlines()
    for prefix in ("python/", ""):
        if all(prefix + path in listed for path in RESOLVER_FILES):
            paths = [*RESOLVER_FILES, PATCHES_FILE, LOADER_FILE, LOADER_COMMON, "pyproject.toml"]
            return [prefix + path for path in paths]
    raise BisectError(f"{repo} at {commit[:10]} has no {' and '.join(RESOLVER_FILES)} "
                      "(under python/ or at the top)")


def bisect(config_file: Path, repo: Path, good: str, bad: str,
           transformers: str | None = None) -> BisectResult:
    repo = repo.expanduser()
    if not repo.is_dir():
        raise BisectError(f"--repo {repo}: no such folder")
    _git(repo, "rev-parse", "--git-dir")  # "not a git repository" comes from git itself
    good_sha, good_subject = _commit(repo, good)
    bad_sha, bad_subject = _commit(repo, bad)
    try:
        _git(repo, "merge-base", "--is-ancestor", good_sha, bad_sha)
    except BisectError:
        raise BisectError(f"{good} is not an ancestor of {bad} in {repo}: no history runs "
                          "from GOOD to BAD") from None
    paths = resolver_paths(repo, good_sha)
    listed = _git(repo, "rev-list", "--reverse", "--ancestry-path", f"{good_sha}..{bad_sha}",
                  "--", *paths).split()  # fmt: skip
    subjects = {sha: _git(repo, "log", "-1", "--format=%s", sha).strip() for sha in listed}
    sources = [commit_source(repo, good_sha, good_subject),
               *(commit_source(repo, sha, subjects[sha]) for sha in listed)]
    if not listed or listed[-1] != bad_sha:
        sources.append(commit_source(repo, bad_sha, bad_subject))
    results = evaluate_sources(config_file, sources, transformers)
    good_result, bad_result = results[0], results[-1]
    candidates = results[1:len(listed) + 1]
    reference = signature(good_result)
    previous = good_result
    for result in candidates:
        if signature(result) != reference:
            return BisectResult(good_result, bad_result, candidates, result, previous)
        previous = result
    return BisectResult(good_result, bad_result, candidates, None, None)


def render(result: BisectResult, console: Console, good: str, bad: str) -> None:
    good_label = f"GOOD {good} ({result.good.source.short})"
    bad_label = f"BAD {bad} ({result.bad.source.short})"
    console.print(f"{len(result.candidates)} commits from {good} to {bad} touch the files the "
                  "audit reads (resolver, transformers patches, config parser, pin); each was "
                  "evaluated", markup=False)
    render_table([result.good, result.bad], console, "tables at the two ends",
                 {0: good_label, 1: bad_label})
    if result.first is None or result.before is None:
        same = signature(result.good) == signature(result.bad)
        console.print("no commit between them changes the table" if same else
                      "no commit touching the files the audit reads changes the table",
                      markup=False)  # fmt: skip
        return
    first, before = result.first, result.before
    console.print(f"first commit whose table differs from {good}'s: "
                  f"{first.source.commit} {first.source.subject}", markup=False)
    render_table([before, first], console, "before and after",
                 {0: f"before {before.source.short}", 1: f"after {first.source.short}"})
    for line in describe_change(before, first):
        console.print(f"  {line}", markup=False)
