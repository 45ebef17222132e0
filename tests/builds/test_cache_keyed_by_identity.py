"""The build cache keyed by the resolved identity, with provenance read from the environment.

One history of a tiny installable `sglang` checkout is built once for the module
(each build is a real venv and a real `pip install`, about a second or two each):
commit 0.0.1, the same state again, commit 0.0.2, an uncommitted edit, the same edit
again, then a commit by ref and the same repository as a `git+file://` URL.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.builds import (
    BUILD_NOTE,
    FREEZE_FILE,
    PreparedBuild,
    copy_freeze,
    parse_build_spec,
    planned_python,
    prepare,
    probe_environment,
)
from harness.builds.sglang_env import build_info
from tests.builds.repos import PIP_ARGS, commit_all, git, make_sglang_repo, set_version

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs the git executable")

Steps = dict[str, PreparedBuild]


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("build-cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HARNESS_CACHE", str(root))
        patch.setenv("HARNESS_PIP_ARGS", PIP_ARGS)
        # a GPU host's builds: a local checkout installed with pip (on a CPU host it is an
        # overlay on its release's environment: tests/builds/test_overlay_on_release_env.py)
        patch.setenv("HARNESS_SGLANG_DEVICE", "cuda")
        yield root


@pytest.fixture(scope="module")
def history(cache: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Steps]:
    repo = make_sglang_repo(tmp_path_factory.mktemp("src") / "sglang", "0.0.1")
    build = parse_build_spec(str(repo))
    steps: Steps = {"first": prepare(build), "first again": prepare(build)}
    set_version(repo, "0.0.2")
    commit_all(repo, "version 0.0.2")
    steps["second"] = prepare(build)
    set_version(repo, "0.0.3.dev0")  # not committed
    steps["dirty"] = prepare(build)
    steps["dirty again"] = prepare(build)
    first_sha = steps["first"].info.git_sha
    steps["first by ref"] = prepare(parse_build_spec(f"{repo}@{first_sha}"))
    steps["url"] = prepare(parse_build_spec(f"git+file://{repo}@main#subdirectory=python"))
    return repo, steps


def _envs(cache: Path) -> list[Path]:
    return sorted(p for p in (cache / "envs").iterdir() if p.is_dir())


def test_two_commits_use_two_builds_and_record_two_shas(history: tuple[Path, Steps]) -> None:
    repo, steps = history
    first, second = steps["first"], steps["second"]
    assert first.python != second.python
    assert (first.info.version, second.info.version) == ("0.0.1", "0.0.2")
    assert first.info.git_sha == git(repo, "rev-parse", "HEAD~1")
    assert second.info.git_sha == git(repo, "rev-parse", "HEAD")
    assert first.info.git_dirty is False and second.info.git_dirty is False


def test_uncommitted_edit_is_a_third_build_marked_dirty(history: tuple[Path, Steps]) -> None:
    repo, steps = history
    dirty = steps["dirty"]
    assert dirty.python not in (steps["first"].python, steps["second"].python)
    assert dirty.info.version == "0.0.3.dev0"
    assert dirty.info.git_dirty is True
    assert dirty.info.git_sha == git(repo, "rev-parse", "HEAD")  # on top of that commit
    assert dirty.info.source_hash != steps["second"].info.source_hash


def test_same_state_reuses_the_build(history: tuple[Path, Steps], cache: Path) -> None:
    _, steps = history
    for again, first in (("first again", "first"), ("dirty again", "dirty"),
                         ("first by ref", "first")):
        assert steps[again].python == steps[first].python
        assert steps[again].info.build_key == steps[first].info.build_key
    # first, second, dirty, url: four environments and no leftovers beside them
    assert len(_envs(cache)) == 4
    assert not [p for p in (cache / "envs").iterdir() if ".building-" in p.name]


def test_git_url_is_resolved_to_its_commit(history: tuple[Path, Steps]) -> None:
    repo, steps = history
    url = steps["url"]
    head = git(repo, "rev-parse", "HEAD")
    assert url.info.version == "0.0.2"  # main's commit, not the dirty working tree
    assert url.info.git_sha == head
    assert url.info.direct_url["vcs_info"]["commit_id"] == head
    assert url.resolved is not None and url.resolved.requirement.endswith(
        f"@{head}#subdirectory=python")


def test_provenance_comes_from_the_environment_not_the_checkout(
    history: tuple[Path, Steps],
) -> None:
    repo, steps = history
    first = steps["first"]
    # The checkout has moved on (a new commit, an edit); the first build's record has not.
    facts = probe_environment(first.python)
    info = build_info(parse_build_spec(str(repo)), facts)
    assert info.git_sha == first.info.git_sha != git(repo, "rev-parse", "HEAD")
    assert info.version == "0.0.1" and info.git_dirty is False
    assert facts.build_note is not None and facts.build_note["commit"] == info.git_sha
    assert (Path(first.python).parents[1] / BUILD_NOTE).is_file()


def test_installed_code_is_the_snapshot(history: tuple[Path, Steps]) -> None:
    _, steps = history
    facts = steps["dirty"].facts
    assert facts.sglang_parent is not None
    installed = Path(facts.sglang_parent) / "sglang" / "version.py"
    assert installed.read_text() == '__version__ = "0.0.3.dev0"\n'
    assert Path(facts.sglang_parent).is_relative_to(Path(steps["dirty"].python).parents[1])


def test_dependency_set_is_hashed_and_kept(history: tuple[Path, Steps], tmp_path: Path) -> None:
    _, steps = history
    first, second = steps["first"].info, steps["second"].info
    assert first.freeze_sha256 != second.freeze_sha256
    kept = Path(first.freeze_path)
    assert kept.read_text() == "sglang==0.0.1\n"
    copied = copy_freeze(first.freeze_path, tmp_path)
    assert copied == tmp_path / FREEZE_FILE and copied.read_text() == "sglang==0.0.1\n"
    assert copy_freeze(None, tmp_path / "absent") is None
    url_line = steps["url"].facts.freeze[0]
    assert url_line.startswith("sglang @ git+file://") and url_line.endswith(
        steps["url"].info.git_sha)


def test_record_fields_validate(history: tuple[Path, Steps]) -> None:
    from harness.results.record import BuildInfo

    info = history[1]["dirty"].info
    again = BuildInfo.model_validate_json(info.model_dump_json())
    assert again.model_dump() == info.model_dump()
    for name in ("git_dirty", "source_hash", "build_key", "direct_url", "freeze_sha256",
                 "freeze_path", "ref"):
        assert name in info.model_dump()


def test_planned_python_matches_the_build(history: tuple[Path, Steps]) -> None:
    repo, steps = history
    assert planned_python(parse_build_spec(f"{repo}@HEAD~1")) == steps["first"].python
    assert planned_python(parse_build_spec(None)) == sys.executable
    moving = planned_python(parse_build_spec("git+https://example.invalid/sglang@main"))
    assert "<resolved at build time>" in moving


def test_half_made_environment_is_rebuilt(cache: Path, tmp_path: Path) -> None:
    repo = make_sglang_repo(tmp_path / "sglang", "0.1.0")
    build = parse_build_spec(str(repo))
    from harness.builds import resolve_build

    env_dir = resolve_build(build).env_dir
    (env_dir / "bin").mkdir(parents=True)
    (env_dir / "bin" / "python").write_text("#!/bin/sh\nexit 1\n")  # no completion marker
    prepared = prepare(build)
    assert prepared.info.version == "0.1.0" and prepared.python == str(env_dir / "bin" / "python")


def test_failed_install_leaves_nothing_behind(cache: Path, tmp_path: Path) -> None:
    from harness.builds import resolve_build
    from harness.errors import EngineError

    repo = make_sglang_repo(tmp_path / "sglang", "0.2.0")
    (repo / "python" / "backend.py").write_text("raise SystemExit('broken backend')\n")
    build = parse_build_spec(str(repo))
    env_dir = resolve_build(build).env_dir
    with pytest.raises(EngineError) as caught:
        prepare(build)
    assert "pip install" in caught.value.message and "failed" in caught.value.message
    assert not env_dir.exists()
    assert not list(env_dir.parent.glob(f"{env_dir.name}.building-*"))
