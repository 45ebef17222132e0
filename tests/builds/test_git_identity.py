"""The one git helper and the resolved identity of a build (no environment is made here)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from harness.builds import gitrepo, parse_build_spec, resolve_build, snapshot_source
from harness.errors import BadInput, EngineError
from tests.builds.repos import commit_all, git, make_sglang_repo, set_version

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs the git executable")


@pytest.fixture(autouse=True)
def gpu_host(monkeypatch: pytest.MonkeyPatch) -> None:
    """A GPU host's builds: a local checkout installed with pip (on a CPU host it is an
    overlay on its release's environment: tests/builds/test_overlay_on_release_env.py)."""
    monkeypatch.setenv("HARNESS_SGLANG_DEVICE", "cuda")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_sglang_repo(tmp_path / "sglang")


def _objects(repo: Path) -> str:
    return git(repo, "count-objects", "-v")


def test_clean_checkout_state(repo: Path) -> None:
    state = gitrepo.working_state(repo)
    assert state.commit == git(repo, "rev-parse", "HEAD")
    assert state.tree == git(repo, "rev-parse", "HEAD^{tree}")
    assert state.dirty is False
    assert gitrepo.head_state(repo) == (state.commit, False)


def test_every_kind_of_uncommitted_change_changes_the_tree(repo: Path) -> None:
    clean = gitrepo.working_state(repo).tree
    trees = {clean}
    set_version(repo, "0.0.2")  # a tracked change
    trees.add(gitrepo.working_state(repo).tree)
    (repo / "python" / "sglang" / "extra.py").write_text("X = 1\n")  # an untracked file
    trees.add(gitrepo.working_state(repo).tree)
    (repo / "python" / "sglang" / "backend.py").unlink(missing_ok=True)
    (repo / "python" / "backend.py").unlink()  # a deleted file
    state = gitrepo.working_state(repo)
    trees.add(state.tree)
    assert len(trees) == 4 and state.dirty
    assert state.commit == git(repo, "rev-parse", "HEAD")  # HEAD did not move


def test_ignored_files_do_not_change_the_identity(repo: Path) -> None:
    clean = gitrepo.working_state(repo)
    (repo / "build.log").write_text("ignored\n")
    (repo / "python" / "sglang" / "__pycache__").mkdir()
    (repo / "python" / "sglang" / "__pycache__" / "x.pyc").write_bytes(b"\0")
    assert gitrepo.working_state(repo) == clean


def test_hashing_leaves_the_repository_untouched(repo: Path) -> None:
    set_version(repo, "0.0.9")
    (repo / "new.txt").write_text("new\n")
    before = (_objects(repo), git(repo, "status", "--porcelain"), git(repo, "stash", "list"))
    gitrepo.working_state(repo, snapshot_to=repo.parent / "snap")
    after = (_objects(repo), git(repo, "status", "--porcelain"), git(repo, "stash", "list"))
    assert after == before


def test_snapshot_is_the_hashed_tree(repo: Path, tmp_path: Path) -> None:
    set_version(repo, "0.0.3")
    (repo / "untracked.txt").write_text("kept\n")
    (repo / "build.log").write_text("ignored\n")
    state = gitrepo.working_state(repo, snapshot_to=tmp_path / "snap")
    snap = tmp_path / "snap"
    assert (snap / "python" / "sglang" / "version.py").read_text() == '__version__ = "0.0.3"\n'
    assert (snap / "untracked.txt").is_file()
    assert not (snap / "build.log").exists() and not (snap / ".git").exists()
    assert state.dirty


def test_commit_of_a_local_ref(repo: Path, tmp_path: Path) -> None:
    first = git(repo, "rev-parse", "HEAD")
    git(repo, "tag", "v1")
    set_version(repo, "0.0.2")
    second = commit_all(repo, "version 0.0.2")
    set_version(repo, "0.0.3")  # uncommitted: never part of a ref's build
    assert gitrepo.rev_parse(repo, "v1") == first
    assert gitrepo.rev_parse(repo, "main") == second
    assert gitrepo.rev_parse(repo, first[:8]) == first
    state = gitrepo.commit_state(repo, "v1", snapshot_to=tmp_path / "snap")
    assert (state.commit, state.dirty) == (first, False)
    version = tmp_path / "snap" / "python" / "sglang" / "version.py"
    assert version.read_text() == '__version__ = "0.0.1"\n'
    with pytest.raises(BadInput, match="'nope' is not a commit, branch or tag"):
        gitrepo.rev_parse(repo, "nope")


def test_remote_refs_resolve_to_commits(repo: Path) -> None:
    first = git(repo, "rev-parse", "HEAD")
    git(repo, "tag", "-a", "v1", "-m", "annotated")  # resolves to the commit, not the tag
    set_version(repo, "0.0.2")
    second = commit_all(repo, "two")
    url = f"file://{repo}"
    assert gitrepo.ls_remote(url, "main") == second
    assert gitrepo.ls_remote(url, None) == second
    assert gitrepo.ls_remote(url, "v1") == first
    assert gitrepo.ls_remote(url, "no-such-branch") is None


def test_unreachable_remote_is_an_engine_error_with_gits_reason(tmp_path: Path) -> None:
    with pytest.raises(EngineError) as caught:
        gitrepo.ls_remote(f"file://{tmp_path}/absent", "main")
    assert "git ls-remote" in caught.value.message and "failed" in caught.value.message


def test_not_a_checkout(tmp_path: Path) -> None:
    assert gitrepo.toplevel(tmp_path) is None
    assert gitrepo.head_state(tmp_path) == (None, None)
    with pytest.raises(BadInput, match="not in a git checkout"):
        gitrepo.working_state(tmp_path)


# ---- resolved identity: the cache key -------------------------------------------------


def test_key_follows_commits_and_edits_not_the_spec_text(repo: Path) -> None:
    build = parse_build_spec(str(repo))
    one = resolve_build(build)
    assert one == resolve_build(build)  # stable
    assert (one.commit, one.dirty) == (git(repo, "rev-parse", "HEAD"), False)
    assert one.subdirectory == "python"
    set_version(repo, "0.0.2")
    dirty = resolve_build(build)
    assert dirty.dirty and dirty.commit == one.commit and dirty.key != one.key
    commit_all(repo, "two")
    two = resolve_build(build)
    assert two.dirty is False and two.commit != one.commit
    assert len({one.key, dirty.key, two.key}) == 3
    assert resolve_build(parse_build_spec(f"{repo}@{one.commit}")).key == one.key


def test_key_of_a_subfolder_spec_is_the_same_source(repo: Path) -> None:
    whole = resolve_build(parse_build_spec(str(repo)))
    python = resolve_build(parse_build_spec(str(repo / "python")))
    assert python.subdirectory == "python" and python.key == whole.key


def test_key_depends_on_patch_content_and_pip_args(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    patch = tmp_path / "fix.diff"
    patch.write_text("--- a/one\n")
    with_one = resolve_build(parse_build_spec(str(repo), patch)).key
    patch.write_text("--- a/two\n")
    with_two = resolve_build(parse_build_spec(str(repo), patch)).key
    without = resolve_build(parse_build_spec(str(repo))).key
    monkeypatch.setenv("HARNESS_PIP_ARGS", "--no-deps")
    no_deps = resolve_build(parse_build_spec(str(repo))).key
    assert len({with_one, with_two, without, no_deps}) == 4


def test_pip_and_git_keys(repo: Path) -> None:
    pip_23 = resolve_build(parse_build_spec("sglang==0.5.23"))
    assert pip_23.key != resolve_build(parse_build_spec("sglang==0.5.17")).key
    assert pip_23.requirement == "sglang==0.5.23"
    head = git(repo, "rev-parse", "HEAD")
    by_branch = resolve_build(parse_build_spec(f"git+file://{repo}@main#subdirectory=python"))
    by_sha = resolve_build(parse_build_spec(f"git+file://{repo}@{head}#subdirectory=python"))
    assert by_branch.commit == by_sha.commit == head and by_branch.key == by_sha.key
    assert by_branch.requirement == f"git+file://{repo}@{head}#subdirectory=python"
    set_version(repo, "0.0.2")
    commit_all(repo, "two")
    moved = resolve_build(parse_build_spec(f"git+file://{repo}@main#subdirectory=python"))
    assert moved.commit != head and moved.key != by_branch.key  # main moved: a new build


def test_unknown_remote_branch_is_bad_input(repo: Path) -> None:
    with pytest.raises(BadInput, match="has no branch or tag nope"):
        resolve_build(parse_build_spec(f"git+file://{repo}@nope#subdirectory=python"))


def test_non_git_folder_is_keyed_by_its_files(tmp_path: Path) -> None:
    folder = tmp_path / "plain"
    (folder / "sglang").mkdir(parents=True)
    (folder / "pyproject.toml").write_text("[project]\nname = 'sglang'\n")
    build = parse_build_spec(str(folder))
    one = resolve_build(build)
    assert one.commit is None and one.source_hash and one.source_hash.startswith("sha256:")
    (folder / "sglang" / "__pycache__").mkdir()
    (folder / "sglang" / "__pycache__" / "a.pyc").write_bytes(b"\0")
    assert resolve_build(build).key == one.key
    (folder / "sglang" / "new.py").write_text("")
    assert resolve_build(build).key != one.key
    with pytest.raises(BadInput, match="not a git checkout, so it has no refs"):
        resolve_build(parse_build_spec(f"{folder}@main"))


def test_checkout_without_a_package(tmp_path: Path) -> None:
    repo = make_sglang_repo(tmp_path / "sglang")
    shutil.rmtree(repo / "python")
    with pytest.raises(BadInput, match=r"no pyproject\.toml in it or in its python/ folder"):
        resolve_build(parse_build_spec(str(repo)))


# ---- snapshot and patch ---------------------------------------------------------------

RESOLVER = (
    "def attention_type(is_causal, default):\n"
    "    if is_causal is None:\n"
    "        return 'bidirectional'\n"
    "    return 'causal' if is_causal else 'bidirectional'\n"
)
FIXED = RESOLVER.replace("return 'bidirectional'\n    return", "return default\n    return")


@pytest.fixture
def checkout_and_patch(repo: Path, tmp_path: Path) -> tuple[Path, Path]:
    source = repo / "python" / "sglang" / "dflash.py"
    source.write_text(RESOLVER)
    commit_all(repo, "resolver")
    source.write_text(FIXED)
    patch = tmp_path / "fix.diff"
    patch.write_text(git(repo, "diff") + "\n")
    source.write_text(RESOLVER)  # the checkout itself stays unpatched
    return repo, patch


def test_patched_snapshot(tmp_path: Path, checkout_and_patch: tuple[Path, Path]) -> None:
    checkout, patch = checkout_and_patch
    resolved = resolve_build(parse_build_spec(str(checkout), patch))
    package = snapshot_source(resolved, tmp_path / "copy")
    assert package == tmp_path / "copy" / "python"
    assert (package / "sglang" / "dflash.py").read_text() == FIXED
    assert (checkout / "python" / "sglang" / "dflash.py").read_text() == RESOLVER
    assert not (tmp_path / "copy" / ".git").exists()
    # a second call starts again from a fresh copy (no "already applied" failure)
    package = snapshot_source(resolved, tmp_path / "copy")
    assert (package / "sglang" / "dflash.py").read_text() == FIXED


def test_edit_between_resolving_and_snapshot_is_caught(
    tmp_path: Path, checkout_and_patch: tuple[Path, Path]
) -> None:
    checkout, _ = checkout_and_patch
    resolved = resolve_build(parse_build_spec(str(checkout)))
    (checkout / "python" / "sglang" / "dflash.py").write_text("edited meanwhile\n")
    with pytest.raises(EngineError, match="changed while it was being built"):
        snapshot_source(resolved, tmp_path / "copy")


def test_patch_that_does_not_apply(tmp_path: Path, checkout_and_patch: tuple[Path, Path]) -> None:
    checkout, patch = checkout_and_patch
    (checkout / "python" / "sglang" / "dflash.py").write_text("something else entirely\n")
    resolved = resolve_build(parse_build_spec(str(checkout), patch))
    with pytest.raises(EngineError) as caught:
        snapshot_source(resolved, tmp_path / "copy")
    assert f"--patch {patch}" in caught.value.message
    assert "failed" in caught.value.message


def test_garbage_patch(tmp_path: Path, checkout_and_patch: tuple[Path, Path]) -> None:
    checkout, _ = checkout_and_patch
    garbage = tmp_path / "garbage.diff"
    garbage.write_text("this is not a diff\n")
    with pytest.raises(BadInput, match=r"garbage\.diff: not a unified diff"):
        parse_build_spec(str(checkout), garbage)  # caught before any work
    garbage.write_text("--- a/x.py\n+++ b/x.py\n@@ this is not a hunk\n")  # git apply says
    resolved = resolve_build(parse_build_spec(str(checkout), garbage))
    with pytest.raises(EngineError, match=r"garbage\.diff"):
        snapshot_source(resolved, tmp_path / "copy")


def test_exact_head_state_only_at_the_root(repo: Path) -> None:
    head = git(repo, "rev-parse", "HEAD")
    assert gitrepo.head_state(repo / "python", exact=True) == (None, None)
    assert gitrepo.head_state(repo / "python") == (head, False)
    assert gitrepo.head_state(repo, exact=True) == (head, False)
    set_version(repo, "0.0.5")
    assert gitrepo.head_state(repo) == (head, True)


def test_editable_install_is_its_folder(repo: Path, harness_cache: Path) -> None:
    """No harness build note: an editable sglang runs its folder's code, so that folder's
    commit is the build's; a plain install has only what its metadata says."""
    from harness.builds import EnvironmentFacts
    from harness.builds.sglang_env import build_info

    head = git(repo, "rev-parse", "HEAD")
    editable = EnvironmentFacts(
        python="/env/bin/python", versions={"sglang": "0.0.1"},
        direct_url={"url": f"file://{repo / 'python'}", "dir_info": {"editable": True}})
    info = build_info(parse_build_spec(None), editable)
    assert (info.git_sha, info.git_dirty, info.version, info.spec) == (head, False, "0.0.1", None)
    vcs = EnvironmentFacts(
        python="/env/bin/python", versions={"sglang": "0.5.23"},
        direct_url={"url": "https://tok@github.com/sgl-project/sglang",
                    "vcs_info": {"vcs": "git", "commit_id": "a" * 40}})
    info = build_info(parse_build_spec(None), vcs)
    assert info.git_sha == "a" * 40 and info.git_dirty is None
    assert info.direct_url["url"] == "https://<redacted>@github.com/sgl-project/sglang"


def test_commits_between_two_refs(repo: Path) -> None:
    good = git(repo, "rev-parse", "HEAD")
    shas = []
    for n in range(2, 5):
        set_version(repo, f"0.0.{n}")
        if n == 3:
            (repo / "README").write_text("docs only\n")
            git(repo, "checkout", "-q", "--", "python")  # this commit leaves python/ alone
        shas.append(commit_all(repo, f"step {n}"))
    commits = gitrepo.commits_between(repo, good, "main")
    assert [c.sha for c in commits] == shas
    assert [c.subject for c in commits] == ["step 2", "step 3", "step 4"]
    assert all(c.author_date[:4].isdigit() for c in commits)
    touching = gitrepo.commits_between(repo, good, "main", paths=("python",))
    assert [c.sha for c in touching] == [shas[0], shas[2]]
    assert gitrepo.commits_between(repo, "main", "main") == []
