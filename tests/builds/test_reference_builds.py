"""Reference-engine builds (inline settings, a git repository's config) and the one probe."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from harness.builds import (
    REPO_ROOT,
    head_state,
    parse_build_spec,
    prepare_reference_env,
    probe_environment,
    resolve_reference_build,
)
from harness.builds.reference import reference_info
from harness.errors import BadInput, EngineError
from tests.builds.repos import (
    commit_all,
    git,
    make_reference_repo,
    write_reference_config,
)

FAKE_SGLANG = Path(__file__).resolve().parents[1] / "fake_sglang"
needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="needs the git executable")


@pytest.fixture(autouse=True)
def _own_cache(harness_cache: Path) -> None:
    """Dependency listings are kept under the cache: a temporary one here."""


def _resolve(spec: str) -> object:
    return resolve_reference_build(parse_build_spec(spec, engine="reference"))


def test_inline_settings() -> None:
    build = _resolve("reference:policy=regressed,noise=0.1")
    assert build.overrides == {"attention_policy": "regressed", "draft_noise": 0.1}
    assert build.commit is None
    assert _resolve("reference:noise=0").overrides == {"draft_noise": 0.0}


def test_the_suite_as_written() -> None:
    assert resolve_reference_build(parse_build_spec(None, engine="reference")).overrides == {}


@pytest.fixture
def history(tmp_path: Path) -> tuple[Path, list[str]]:
    """fixed/0.0, then regressed/0.0, then regressed/0.3: three engine 'commits'."""
    repo = make_reference_repo(tmp_path / "engine", "fixed", 0.0)
    shas = [git(repo, "rev-parse", "HEAD")]
    for policy, noise in (("regressed", 0.0), ("regressed", 0.3)):
        write_reference_config(repo, policy, noise)
        shas.append(commit_all(repo, f"{policy} {noise}"))
    return repo, shas


@needs_git
def test_config_is_read_at_each_commit(history: tuple[Path, list[str]]) -> None:
    repo, shas = history
    seen = [_resolve(f"reference:{repo}@{sha}") for sha in shas]
    assert [b.overrides for b in seen] == [
        {"attention_policy": "fixed", "draft_noise": 0.0},
        {"attention_policy": "regressed", "draft_noise": 0.0},
        {"attention_policy": "regressed", "draft_noise": 0.3}]
    assert [b.commit for b in seen] == shas
    assert all(b.dirty is False for b in seen)
    assert _resolve(f"reference:{repo}@main").commit == shas[-1]
    assert _resolve(f"reference:{repo}@HEAD~2").overrides["attention_policy"] == "fixed"


@needs_git
def test_working_tree_config_is_marked_dirty(history: tuple[Path, list[str]]) -> None:
    repo, shas = history
    clean = _resolve(f"reference:{repo}")
    assert (clean.commit, clean.dirty) == (shas[-1], False)
    write_reference_config(repo, "legacy", 0.5)
    dirty = _resolve(f"reference:{repo}")
    assert dirty.overrides == {"attention_policy": "legacy", "draft_noise": 0.5}
    assert dirty.dirty is True and dirty.commit == shas[-1]
    assert dirty.source_hash != clean.source_hash


@needs_git
def test_unknown_ref_and_not_a_repository(history: tuple[Path, list[str]], tmp_path: Path) -> None:
    repo, _ = history
    with pytest.raises(BadInput, match="'nope' is not a commit, branch or tag"):
        _resolve(f"reference:{repo}@nope")
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(BadInput, match="not a git repository"):
        _resolve(f"reference:{plain}")


@needs_git
@pytest.mark.parametrize(("text", "why"), [
    (None, "no reference-build.toml at"),
    ("attention_policy = 'sideways'\n", "attention_policy must be one of fixed, legacy, regressed"),
    ("draft_noise = 3\n", "draft_noise must be a number in [0, 1], got 3"),
    ("draft_noise = true\n", "draft_noise must be a number in [0, 1], got True"),
    ("speed = 1\n", "unknown keys speed; allowed: attention_policy, draft_noise"),
    ("attention_policy = \n", "not valid TOML"),
])
def test_a_commit_whose_config_is_unusable_fails_to_build(
    tmp_path: Path, text: str | None, why: str
) -> None:
    repo = make_reference_repo(tmp_path / "engine")
    config = repo / "reference-build.toml"
    if text is None:
        config.unlink()
    else:
        config.write_text(text)
    sha = commit_all(repo, "break it")
    with pytest.raises(EngineError) as caught:  # an engine error: a bisect skips the commit
        _resolve(f"reference:{repo}@{sha}")
    assert why in caught.value.message and "reference-build.toml" in caught.value.message


@needs_git
def test_build_info_names_the_config_commit(history: tuple[Path, list[str]]) -> None:
    repo, shas = history
    build = _resolve(f"reference:{repo}@{shas[1]}")
    info = reference_info(probe_environment(sys.executable), build)
    assert info.engine == "reference" and info.git_sha == shas[1] and info.git_dirty is False
    assert info.options == {"attention_policy": "regressed", "draft_noise": 0.0}
    assert info.spec == f"reference:{repo.resolve()}@{shas[1]}" and info.ref == shas[1]
    assert info.freeze_sha256 and Path(info.freeze_path).is_file()


def test_build_info_of_inline_settings_names_the_harness_commit() -> None:
    info = reference_info(probe_environment(sys.executable),
                          _resolve("reference:policy=legacy"))
    assert info.git_sha == head_state(REPO_ROOT)[0]
    assert info.options == {"attention_policy": "legacy"}
    assert info.spec == "reference:policy=legacy"


def test_engine_python_without_the_reference_packages(tmp_path: Path) -> None:
    bare = tmp_path / "bare"
    import venv

    venv.create(bare, with_pip=False)
    with pytest.raises(EngineError, match="lacks the reference engine's packages"):
        prepare_reference_env(str(bare / "bin" / "python"))


# ---- the one probe of another interpreter ---------------------------------------------


def test_probe_reads_a_distribution_without_importing_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PYTHONPATH", str(FAKE_SGLANG))
    facts = probe_environment(sys.executable)
    assert facts.sglang_version == "0.5.23"
    assert facts.sglang_parent == str(FAKE_SGLANG)
    assert facts.direct_url is None and facts.sglang_commit is None
    assert "sglang==0.5.23" in facts.freeze
    assert facts.python_version == sys.version.split()[0]
    assert len(facts.freeze_sha256) == 64


def test_probe_of_a_bare_environment(tmp_path: Path) -> None:
    import venv

    venv.create(tmp_path / "bare", with_pip=False)
    facts = probe_environment(str(tmp_path / "bare" / "bin" / "python"))
    assert facts.sglang_version is None and facts.sglang_parent is None
    assert facts.versions["torch"] is None and facts.cuda is None
    assert facts.reference_ready is False and facts.build_note is None
    assert facts.freeze == ()


def test_probe_of_a_missing_interpreter(tmp_path: Path) -> None:
    with pytest.raises(EngineError) as caught:
        probe_environment(str(tmp_path / "nope"))
    assert caught.value.message.startswith(f"cannot inspect the engine environment {tmp_path}")


def test_each_checkout_gets_its_own_reference_environment(tmp_path: Path) -> None:
    """Issue 27, case 10: the environment was an editable install of whichever checkout
    built it first, keyed by the requirements alone: a second checkout ran the first
    one's engine code under its own commit. The key now holds the checkout."""
    from harness.builds.reference import REPO_ROOT, reference_env_dir

    requirements = ["torch==2.13.0", "safetensors>=0.4"]
    here = reference_env_dir(requirements, REPO_ROOT)
    assert here == reference_env_dir(list(requirements), REPO_ROOT)  # stable
    assert here != reference_env_dir(requirements, tmp_path / "another-checkout")
    assert here != reference_env_dir([*requirements, "numpy>=2"], REPO_ROOT)
    assert here.name.startswith("reference-")
