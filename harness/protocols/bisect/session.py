"""A bisect session on disk: what it bisects, and what each step found.

`results/bisect/<session>/session.json` is written once at the start: the suite, the
GOOD and BAD specs, the repository, the commits between them and the statistical
settings. `steps.jsonl` gets one line per finished measurement (endpoint, step or
extension), appended and flushed as it finishes; each names its run record (labelled
`bisect-<session>-<role>`), whose `measurement.sequential` repeats the step's verdict.
`--resume` replays that journal and carries on; a step interrupted half way left only a
partial run record (verdict error) and is measured again.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from harness.builds import BuildSpec, cache_root, gitrepo, parse_build_spec, split_git_url
from harness.errors import BadInput, EngineError
from harness.protocols.bisect.journal import (
    Commit,
    JournalEntry,
    commits_from_json,
    entry_from_json,
)
from harness.results.record import utc_now
from harness.workloads import planned_questions

if TYPE_CHECKING:
    from harness.suite.entries import Workload
    from harness.suite.schema import LoadedSuite

SESSIONS_DIR = "bisect"
SESSION_FILE = "session.json"
STEPS_FILE = "steps.jsonl"
CLONE_TIMEOUT_S = 1800.0
# A step's error bound (harness.protocols.bisect.rule): a bisect of s steps errs with
# P <= s * alpha.
DEFAULT_ALPHA = 0.01


@dataclass(frozen=True)
class Endpoints:
    """GOOD and BAD as commits of one repository, and how to spell a build of any commit
    of it: `PATH@SHA`, `git+URL@SHA[#frag]` or `reference:PATH@SHA`."""

    kind: str  # "local" | "git" | "reference-repo"
    repo: Path  # where the commits are listed
    location: str  # the checkout folder or the git URL
    fragment: str = ""  # `#subdirectory=python` of a git spec

    def spec_for(self, sha: str) -> str:
        if self.kind == "git":
            return f"git+{self.location}@{sha}{self.fragment}"
        prefix = "reference:" if self.kind == "reference-repo" else ""
        return f"{prefix}{self.location}@{sha}"


def _parse(spec: str, engine: str, flag: str) -> BuildSpec:
    build = parse_build_spec(spec, engine=engine, flag=flag)  # type: ignore[arg-type]
    if build.kind not in ("local", "git", "reference-repo"):
        raise BadInput(f"{flag} {spec!r}: a bisect needs commits of a git repository: "
                       "PATH@REF, git+URL@REF or (reference engine) reference:PATH@REF")
    if not build.ref:
        raise BadInput(f"{flag} {spec!r}: name a commit, branch or tag (…@REF); a working "
                       "tree is no point in a history")
    return build


def endpoints(good: str, bad: str, engine: str, repo: Path | None) -> tuple[Endpoints, str, str]:
    """(how to build any commit, GOOD's ref, BAD's ref); bad input when GOOD and BAD are
    not refs of one repository."""
    a, b = _parse(good, engine, "--good"), _parse(bad, engine, "--bad")
    if a.kind != b.kind:
        raise BadInput(f"--good {good!r} and --bad {bad!r} are different kinds of build; "
                       "both must name refs of one repository")
    assert a.ref is not None and b.ref is not None
    if a.kind == "git":
        url_a, _, frag_a = split_git_url(a.spec or "")
        url_b, _, frag_b = split_git_url(b.spec or "")
        if (url_a.rstrip("/"), frag_a) != (url_b.rstrip("/"), frag_b):
            raise BadInput(f"--good and --bad name different repositories ({url_a}{frag_a} "
                           f"vs {url_b}{frag_b})")
        where = repo if repo is not None else mirror(url_a)
        return Endpoints("git", _toplevel(where, "--repo"), url_a, frag_a), a.ref, b.ref
    root_a = _toplevel(Path(a.spec or "."), "--good")
    root_b = _toplevel(Path(b.spec or "."), "--bad")
    if root_a.resolve() != root_b.resolve() or Path(a.spec or "") != Path(b.spec or ""):
        raise BadInput(f"--good {good!r} and --bad {bad!r} are not the same checkout")
    listed = _toplevel(repo, "--repo") if repo is not None else root_a
    return Endpoints(a.kind, listed, str(a.spec)), a.ref, b.ref


def _toplevel(path: Path, flag: str) -> Path:
    root = gitrepo.toplevel(path)
    if root is None:  # a bare repository (a mirror) has a git dir but no work tree
        try:
            gitrepo.git(["rev-parse", "--git-dir"], path, f"{flag} {path}")
        except EngineError:
            raise BadInput(f"{flag} {path}: not a git repository") from None
        return path
    return root


def mirror(url: str) -> Path:
    """A blobless bare clone of `url` in the cache (fetched again if it exists), to list
    commits of a git+URL bisect when no --repo is given."""
    folder = cache_root() / "bisect-repos" / hashlib.sha256(url.encode()).hexdigest()[:16]
    if (folder / "HEAD").is_file():
        gitrepo.git(["fetch", "--quiet", "--tags", "origin", "+refs/heads/*:refs/heads/*"],
                    folder, f"fetching {url} into {folder}", timeout_s=CLONE_TIMEOUT_S)
    else:
        folder.parent.mkdir(parents=True, exist_ok=True)
        gitrepo.git(["clone", "--quiet", "--bare", "--filter=blob:none", "--", url,
                     str(folder)], None, f"cloning {url} to list its commits (or pass --repo "
                     "PATH, a local clone)", timeout_s=CLONE_TIMEOUT_S)
    return folder


def list_commits(repo: Path, good: str, bad: str, *, first_parent: bool,
                 paths: tuple[str, ...]) -> tuple[str, str, list[Commit], bool]:
    """(GOOD's sha, BAD's sha, the commits to bisect oldest first, whether BAD was added
    because it touches none of `paths`); BAD is always the last."""
    good_sha, bad_sha = gitrepo.rev_parse(repo, good), gitrepo.rev_parse(repo, bad)
    if good_sha == bad_sha:
        raise BadInput(f"--good {good} and --bad {bad} are the same commit {good_sha[:12]}")
    try:
        gitrepo.git(["merge-base", "--is-ancestor", good_sha, bad_sha], repo,
                    "checking that GOOD is an ancestor of BAD")
    except EngineError:
        raise BadInput(f"--good {good} ({good_sha[:12]}) is not an ancestor of --bad {bad} "
                       f"({bad_sha[:12]}) in {repo}") from None
    commits = gitrepo.commits_between(repo, good_sha, bad_sha, first_parent=first_parent,
                                      paths=paths)
    listed: list[Commit] = [{"sha": c.sha, "subject": c.subject,
                             "author_date": c.author_date} for c in commits]
    added = False
    if not listed or listed[-1]["sha"] != bad_sha:
        listed.append(describe(repo, bad_sha))
        added = True
    return good_sha, bad_sha, listed, added


def describe(repo: Path, sha: str) -> Commit:
    """A commit's sha, subject and author date (ISO 8601)."""
    out = gitrepo.git(["log", "-1", "--format=%H%x00%aI%x00%s", sha, "--"], repo,
                      f"describing {sha[:12]}")
    full, date, subject = out.strip("\n").split("\0", 2)
    return {"sha": full, "subject": subject, "author_date": date}


@dataclass
class Session:
    """What a session bisects (session.json), and where its files are."""

    session: str
    suite: str
    suite_sha256: str
    good: str
    bad: str
    kind: str
    repo: str
    location: str
    fragment: str
    good_sha: str
    bad_sha: str
    commits: list[Commit]
    first_parent: bool
    paths: list[str]
    bad_added: bool  # BAD touches none of `paths`: listed last anyway
    metric: str
    alpha: float
    wave: int
    prompts: int
    max_prompts: int
    results: str
    started_at: str
    engine_python: str | None = None
    extra: dict[str, object] = field(default_factory=dict)

    @property
    def folder(self) -> Path:
        return Path(self.results) / SESSIONS_DIR / self.session

    @property
    def endpoints(self) -> Endpoints:
        return Endpoints(self.kind, Path(self.repo), self.location, self.fragment)

    def label(self, role: str) -> str:
        return f"bisect-{self.session}-{role}"

    def create(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=False)
        (self.folder / SESSION_FILE).write_text(json.dumps(asdict(self), indent=2) + "\n")

    def append(self, entry: JournalEntry) -> None:
        with open(self.folder / STEPS_FILE, "a", encoding="utf-8") as journal:
            journal.write(json.dumps(entry, default=str) + "\n")
            journal.flush()
            os.fsync(journal.fileno())

    def journal(self) -> list[JournalEntry]:
        """The finished measurements, each checked (BadInput naming the line and field)."""
        path = self.folder / STEPS_FILE
        if not path.is_file():
            return []
        entries: list[JournalEntry] = []
        lines = path.read_text().splitlines()
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                data = json.loads(line)
            except ValueError:  # the last line cut short by a crash: that step runs again
                if number < len(lines):
                    raise BadInput(f"{path}:{number}: not a journal entry") from None
                continue
            try:
                entries.append(entry_from_json(data, f"{path}:{number}"))
            except ValueError as error:
                raise BadInput(str(error)) from None
        return entries


def new_session_id(now: datetime) -> str:
    return f"{now.strftime('%Y%m%dT%H%M%SZ')}-{secrets.token_hex(3)}"


def load_session(results: Path, session: str | None) -> Session:
    """A session by id, or the most recent one in `results` (bad input if none)."""
    root = Path(results) / SESSIONS_DIR
    if session is None:
        found = sorted(p.parent.name for p in root.glob(f"*/{SESSION_FILE}"))
        if not found:
            raise BadInput(f"--resume: no bisect session under {root}")
        session = found[-1]
    path = root / session / SESSION_FILE
    if not path.is_file():
        raise BadInput(f"--resume {session}: no {path}")
    try:
        data = json.loads(path.read_text())
        loaded = Session(**data)
        loaded.commits = commits_from_json(loaded.commits, str(path))
    except (ValueError, TypeError) as error:
        raise BadInput(f"{path}: not a bisect session ({error})") from None
    loaded.results = str(results)
    return loaded


# The most questions a workload kind can ask (None: as many as its data has).
QUESTION_LIMITS = {"gsm8k": 1319, "humaneval": 164, "jsonl": None}


def prompt_counts(workload: Workload, prompts: int | None, max_prompts: int | None
                  ) -> tuple[int, int]:
    """(questions a step asks, questions an undecided step is extended to). Only kinds
    with a `questions` count can change it; the others bisect on their fixed set."""
    planned = planned_questions(workload)
    if workload.kind not in QUESTION_LIMITS or getattr(workload, "questions", None) is None:
        if prompts not in (None, planned) or max_prompts not in (None, planned):
            raise BadInput(f"--prompts/--max-prompts: a {workload.kind} workload asks its "
                           f"fixed {planned} questions")
        return planned, planned
    limit = QUESTION_LIMITS[workload.kind]
    if limit is not None:
        limit -= getattr(workload, "shots", 0)  # GSM8K's shots come from the same file
    base = prompts or planned
    ceiling = max_prompts if max_prompts is not None else (
        2 * base if limit is None else min(2 * base, limit))
    if not 2 <= base <= ceiling or (limit is not None and ceiling > limit):
        raise BadInput(f"--prompts {base} / --max-prompts {ceiling}: need 2 <= prompts <= "
                       f"max-prompts" + (f" <= {limit}" if limit is not None else ""))
    return base, ceiling


def create_session(loaded: LoadedSuite, good: str, bad: str, *, repo: Path | None, results: Path,
                   first_parent: bool, paths: tuple[str, ...], alpha: float | None,
                   wave: int, prompts: int | None, max_prompts: int | None,
                   engine_python: str | None) -> Session:
    """Check the inputs, list the commits and write session.json (bad input: exit 2)."""
    suite = loaded.suite
    ends, good_ref, bad_ref = endpoints(good, bad, suite.engine.kind, repo)
    good_sha, bad_sha, commits, added = list_commits(ends.repo, good_ref, bad_ref,
                                                     first_parent=first_parent, paths=paths)
    base, ceiling = prompt_counts(suite.workload, prompts, max_prompts)
    if wave < 20:
        raise BadInput(f"--wave {wave}: at least 20 prompts a look (the t approximation)")
    level = alpha if alpha is not None else DEFAULT_ALPHA
    if not 0.0 < level < 0.5:
        raise BadInput(f"--alpha {level}: must be in (0, 0.5)")
    now = utc_now()
    session = Session(
        session=new_session_id(now), suite=str(Path(loaded.path).resolve()),
        suite_sha256=loaded.sha256,
        good=good, bad=bad, kind=ends.kind, repo=str(ends.repo), location=ends.location,
        fragment=ends.fragment, good_sha=good_sha, bad_sha=bad_sha, commits=commits,
        first_parent=first_parent, paths=list(paths), bad_added=added,
        metric=suite.floors.metric, alpha=level, wave=wave, prompts=base,
        max_prompts=ceiling, results=str(results), started_at=now.isoformat(),
        engine_python=engine_python)
    session.create()
    return session
