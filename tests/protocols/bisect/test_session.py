"""Bisect inputs: GOOD and BAD as refs of one repository, the commits between them, the
session files and their replay. Git only: no engine runs here."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from harness.cli import main
from harness.errors import BadInput
from harness.protocols.bisect.session import (
    Session,
    create_session,
    endpoints,
    list_commits,
    load_session,
)
from harness.protocols.bisect.steps import measure, reference_rule
from harness.suite.model import SUITES_DIR, load_suite
from tests.builds.repos import commit_all, make_sglang_repo
from tests.protocols.bisect.history import git, make_history

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
TINY = SUITES_DIR / "tiny_dflash_cpu.toml"


@pytest.fixture
def history(tmp_path: Path) -> tuple[Path, list[str]]:
    return make_history(tmp_path / "engine", commits=8, change_at=5)


def test_reference_refs_list_the_commits_in_order(history: tuple[Path, list[str]]) -> None:
    repo, shas = history
    ends, good, bad = endpoints(f"reference:{repo}@{shas[0]}", f"reference:{repo}@main",
                                "reference", None)
    assert ends.kind == "reference-repo" and ends.repo == repo.resolve()
    assert ends.spec_for(shas[3]) == f"reference:{repo.resolve()}@{shas[3]}"
    good_sha, bad_sha, commits, added = list_commits(ends.repo, good, bad, first_parent=True,
                                                     paths=())
    assert (good_sha, bad_sha, added) == (shas[0], shas[-1], False)
    assert [c["sha"] for c in commits] == shas[1:]
    assert commits[4]["subject"] == "engine change 5: draft noise 0.25"
    assert commits[0]["author_date"][:2] == "20"
    # only the commits touching docs/ (changes 4 and 8); BAD is the last of them
    _, _, docs, added = list_commits(ends.repo, good, bad, first_parent=True, paths=("docs",))
    assert [c["sha"] for c in docs] == [shas[4], shas[8]] and not added
    # BAD touches no reference-build.toml change after 5: listed last anyway, and said so
    _, _, config, added = list_commits(ends.repo, good, shas[7], first_parent=True,
                                       paths=("reference-build.toml",))
    assert [c["sha"] for c in config] == [shas[5], shas[7]] and added


def test_first_parent_by_default_every_commit_with_all(tmp_path: Path) -> None:
    repo, shas = make_history(tmp_path / "engine", commits=2)
    git(repo, "checkout", "-q", "-b", "topic", shas[1])
    (repo / "topic.txt").write_text("a\n")
    side = [commit_all(repo, "topic 1")]
    (repo / "topic.txt").write_text("b\n")
    side.append(commit_all(repo, "topic 2"))
    git(repo, "checkout", "-q", "main")
    git(repo, "merge", "-q", "--no-ff", "-m", "merge topic", "topic")
    merge = git(repo, "rev-parse", "HEAD")
    first = list_commits(repo, shas[0], merge, first_parent=True, paths=())[2]
    every = list_commits(repo, shas[0], merge, first_parent=False, paths=())[2]
    assert [c["sha"] for c in first] == [shas[1], shas[2], merge]
    assert {c["sha"] for c in every} == {shas[1], shas[2], *side, merge}


@pytest.mark.parametrize(("good", "bad", "why"), [
    ("reference:{repo}", "reference:{repo}@main", "name a commit, branch or tag"),
    ("reference:policy=fixed", "reference:{repo}@main", "needs commits of a git repository"),
    ("reference:{repo}@{c0}", "reference:{other}@main", "are not the same checkout"),
    ("reference:{repo}@{c2}", "reference:{repo}@{c0}", "is not an ancestor of --bad"),
    ("reference:{repo}@main", "reference:{repo}@{c8}", "are the same commit"),
    ("reference:{repo}@nope", "reference:{repo}@main", "'nope' is not a commit"),
    ("{repo}@{c0}", "{repo}@main", "is an SGLang build, but this suite runs the reference"),
])
def test_bad_endpoints_are_bad_input(history: tuple[Path, list[str]], tmp_path: Path,
                                     good: str, bad: str, why: str) -> None:
    repo, shas = history
    other, _ = make_history(tmp_path / "other", commits=1)
    names = {"repo": repo, "other": other, **{f"c{i}": s for i, s in enumerate(shas)}}
    with pytest.raises(BadInput, match=why):
        create_session(load_suite(TINY), good.format(**names), bad.format(**names),
                       repo=None, results=tmp_path / "results", first_parent=True, paths=(),
                       alpha=None, wave=20, prompts=40, max_prompts=None, engine_python=None)
    assert not (tmp_path / "results" / "bisect").exists()  # nothing written on bad input


def test_sglang_checkouts_and_git_urls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    harness_cache = tmp_path / "cache"
    monkeypatch.setenv("HARNESS_CACHE", str(harness_cache))
    repo = make_sglang_repo(tmp_path / "sglang", "0.0.1")
    first = git(repo, "rev-parse", "HEAD")
    (repo / "python" / "sglang" / "version.py").write_text('__version__ = "0.0.2"\n')
    last = commit_all(repo, "0.0.2")
    local, good, bad = endpoints(f"{repo}@{first}", f"{repo}@main", "sglang", None)
    assert local.spec_for(last) == f"{repo.resolve()}@{last}"
    url = f"file://{repo}"
    frag = "#subdirectory=python"
    remote, good, bad = endpoints(f"git+{url}@{first}{frag}", f"git+{url}@main{frag}",
                                  "sglang", None)  # no --repo: a blobless clone in the cache
    assert remote.kind == "git" and str(remote.repo).startswith(str(harness_cache))
    assert remote.spec_for(last) == f"git+{url}@{last}{frag}"
    assert [c["sha"] for c in list_commits(remote.repo, good, bad, first_parent=True,
                                           paths=())[2]] == [last]
    with_repo, _, _ = endpoints(f"git+{url}@{first}", f"git+{url}@main", "sglang", repo)
    assert with_repo.repo == repo.resolve()
    with pytest.raises(BadInput, match="different repositories"):
        endpoints(f"git+{url}@{first}", f"git+{url}x@main", "sglang", repo)


def test_session_files_and_resume_lookup(history: tuple[Path, list[str]], tmp_path: Path) -> None:
    repo, shas = history
    results = tmp_path / "results"
    session = create_session(load_suite(TINY), f"reference:{repo}@{shas[0]}",
                             f"reference:{repo}@main", repo=None, results=results,
                             first_parent=True, paths=(), alpha=None, wave=20, prompts=40,
                             max_prompts=None, engine_python=None)
    assert (session.prompts, session.max_prompts, session.alpha) == (40, 80, 0.01)
    assert session.metric == "server_avg" and len(session.commits) == 8
    session.append({"role": "good", "verdict": "reference"})
    with open(session.folder / "steps.jsonl", "a") as journal:
        journal.write('{"role": "bad", "verd')  # cut short by a crash: ignored
    again = load_session(results, None)
    assert isinstance(again, Session) and again.session == session.session
    assert [e["role"] for e in again.journal()] == ["good"]
    assert json.loads((session.folder / "session.json").read_text())["good_sha"] == shas[0]
    with pytest.raises(BadInput, match="no bisect session"):
        load_session(tmp_path / "elsewhere", None)


def test_a_commit_that_does_not_build_is_a_skip_not_an_error(tmp_path: Path) -> None:
    """Its config does not parse: no launch, no run folder, a skip with the reason."""
    repo, shas = make_history(tmp_path / "engine", commits=2, broken_at=1)
    entry = measure(load_suite(TINY), f"reference:{repo}@{shas[1]}", "bisect-x-step-01", 20,
                    reference_rule("server_avg", 20, {}), tmp_path / "results", None)
    assert entry["verdict"] == "skip" and "not valid TOML" in entry["reason"]
    assert entry["requests"] == 0 and not (tmp_path / "results" / "runs").exists()


def test_cli_refuses_bad_input_with_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                           ) -> None:
    assert main(["bisect", str(TINY), "--good", "reference:policy=fixed"]) == 2
    assert "needs SUITE, --good SPEC and --bad SPEC" in capsys.readouterr().err
    assert main(["bisect", "--resume", "--results", str(tmp_path)]) == 2
    assert "no bisect session" in capsys.readouterr().err


def test_a_fixed_prompt_set_is_bisected_as_it_is() -> None:
    """Spec-Bench has no `questions` count: its suite stays as written (it used to be
    refused, so every step of a Spec-Bench bisect was skipped)."""
    from harness.protocols.bisect.steps import with_questions
    from harness.suite.model import load_suite

    spec_bench = load_suite("tiny_spec_bench_cpu")
    assert with_questions(spec_bench, 18) is spec_bench
    gsm8k = with_questions(load_suite("tiny_dflash_cpu"), 20)
    assert gsm8k.suite.workload.questions == 20
