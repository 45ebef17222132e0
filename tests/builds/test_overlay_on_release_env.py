"""A local SGLang checkout on a CPU host (harness/builds/overlay.py): its package, snapshotted
at the commit, over the CPU environment of the release its version file names, through
the patched-tree mechanism. Fast: no server, no real engine environment (a complete
environment's files are laid out under a temporary cache)."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.builds import folder_sha256, parse_build_spec, resolve_build
from harness.builds import sglang_env as env_module
from harness.builds.envs import COMPLETE
from harness.builds.overlay import (
    check_dependencies,
    dependency_difference,
    project_dependencies,
    read_version,
    release_error,
)
from harness.builds.patched import NOTE
from harness.builds.probe import BUILD_NOTE, EnvironmentFacts
from harness.errors import BadInput, EngineError, HarnessError
from tests.builds.repos import commit_all, git, init_repo
from tests.parsed_or_refused import parsed_or_refused

RELEASE_KEPT = ["aiohttp", "transformers==5.19.0", "numpy"]
PYPROJECT = """[project]
name = "sglang"
version = "0.5.23"
dependencies = [
    "aiohttp",
    "Transformers == 5.19.0",
    "numpy",
    "torch==2.14.1",
    "sglang-kernel==0.4.10",
    "nvidia-cutlass-dsl>=4.3",
    "flashinfer_python==0.6.1 ; sys_platform == 'linux'",
    "pywin32 ; sys_platform == 'win32'",
]
"""
DFLASH = ("def default():\n    return 'DECODER'\n\n\n" + "# filler\n" * 6
          + "\n\ndef other():\n    return 1\n")


@pytest.fixture(autouse=True)
def cpu_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HARNESS_SGLANG_DEVICE", "cpu")
    monkeypatch.setenv("HARNESS_CACHE", str(tmp_path / "cache"))
    for name in ("HARNESS_PIP_ARGS", "HARNESS_TORCH_INDEX"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path / "cache"


def sglang_checkout(path: Path, version: str = "0.5.23") -> Path:
    """A checkout laid out like SGLang's: python/sglang/... and python/pyproject.toml."""
    repo = init_repo(path)
    package = repo / "python" / "sglang"
    (package / "srt").mkdir(parents=True)
    (package / "__init__.py").write_text("from sglang.version import __version__\n")
    (package / "version.py").write_text(f'__version__ = "{version}"\n')
    (package / "srt" / "dflash.py").write_text(DFLASH)
    (repo / "python" / "pyproject.toml").write_text(PYPROJECT)
    commit_all(repo, f"sglang {version}")
    return repo


def released_env(cache: Path, version: str = "0.5.23",
                 kept: list[str] = RELEASE_KEPT) -> Path:
    """The files of a complete CPU environment of `sglang==<version>` (as the CPU recipe
    leaves them): its interpreter, marker, note and installed package."""
    release = resolve_build(parse_build_spec(f"sglang=={version}"))
    env = release.env_dir
    (env / "bin").mkdir(parents=True)
    (env / "bin" / "python").symlink_to(sys.executable)
    (env / COMPLETE).write_text("[]")
    (env / BUILD_NOTE).write_text(json.dumps({
        "spec": f"sglang=={version}", "key": release.key, "identity": release.identity,
        "device": "cpu", "installed": {"recipe": "sglang-cpu-1", "dependencies": kept}}))
    site = env / "site"
    (site / "sglang" / "srt").mkdir(parents=True)
    (site / "sglang" / "__init__.py").write_text("")
    (site / "sglang" / "srt" / "dflash.py").write_text(DFLASH)
    (site / "sglang" / "srt" / "rust").mkdir()  # a compiled extension (0.5.23 has Rust ones)
    (site / "sglang" / "srt" / "rust" / "_server.cpython-311-x86_64-linux-gnu.so").write_bytes(
        b"\x7fELF release")
    info = site / f"sglang-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Name: sglang\nVersion: {version}\n")
    return env


def facts_of(env: Path) -> EnvironmentFacts:
    return EnvironmentFacts(python=str(env / "bin" / "python"), sglang_parent=str(env / "site"),
                            versions={"sglang": "0.5.23"},
                            build_note=json.loads((env / BUILD_NOTE).read_text()))


# ---- resolving: the release a tree names, the identity --------------------------------

def test_a_checkout_resolves_to_an_overlay_on_its_releases_env(tmp_path: Path) -> None:
    repo = sglang_checkout(tmp_path / "sglang")
    release = resolve_build(parse_build_spec("sglang==0.5.23"))
    resolved = resolve_build(parse_build_spec(f"{repo}@main"))
    assert resolved.method == "overlay" and resolved.base == release
    assert resolved.env_dir == release.env_dir  # shared with the pip release, cached once
    assert resolved.identity["version"] == "0.5.23"
    assert resolved.identity["base"] == release.identity
    assert resolved.commit == git(repo, "rev-parse", "HEAD")
    assert resolved.subdirectory == "python"
    assert resolved.dependencies is not None and "torch==2.14.1" in resolved.dependencies


def test_two_commits_two_keys_the_same_commit_one(tmp_path: Path) -> None:
    repo = sglang_checkout(tmp_path / "sglang")
    first = git(repo, "rev-parse", "HEAD")
    (repo / "python" / "sglang" / "srt" / "dflash.py").write_text(DFLASH + "# a comment\n")
    second = commit_all(repo, "a comment")
    one = resolve_build(parse_build_spec(f"{repo}@{first}"))
    two = resolve_build(parse_build_spec(f"{repo}@{second}"))
    assert one.key != two.key and one.source_hash != two.source_hash
    assert one.base == two.base  # one environment for both
    assert resolve_build(parse_build_spec(f"{repo}@{first}")).key == one.key
    assert resolve_build(parse_build_spec(f"{repo}@main")).key == two.key
    assert resolve_build(parse_build_spec(str(repo))).key == two.key  # clean working tree


def test_the_version_is_read_at_the_commit(tmp_path: Path) -> None:
    repo = sglang_checkout(tmp_path / "sglang", "0.5.22")
    old = git(repo, "rev-parse", "HEAD")
    (repo / "python" / "sglang" / "version.py").write_text('__version__ = "0.5.23"\n')
    new = commit_all(repo, "0.5.23")
    (repo / "python" / "sglang" / "version.py").write_text('__version__ = "0.5.24"\n')
    assert resolve_build(parse_build_spec(f"{repo}@{old}")).base.build.spec == "sglang==0.5.22"
    assert resolve_build(parse_build_spec(f"{repo}@{new}")).base.build.spec == "sglang==0.5.23"
    working = resolve_build(parse_build_spec(str(repo)))  # uncommitted: the working tree's
    assert working.base.build.spec == "sglang==0.5.24" and working.dirty


def test_a_setuptools_scm_checkout_reads_its_generated_file_or_its_tag(tmp_path: Path) -> None:
    repo = sglang_checkout(tmp_path / "sglang")
    package = repo / "python" / "sglang"
    (package / "version.py").write_text(  # SGLang 0.5.x: the version comes from elsewhere
        "try:\n    from sglang._version import __version__\nexcept ImportError:\n"
        "    __version__ = '0.0.0.dev0' if False else None\n")
    commit_all(repo, "scm")
    with pytest.raises(BadInput, match="no v<version> tag"):
        resolve_build(parse_build_spec(f"{repo}@main"))
    git(repo, "tag", "v0.5.22")
    tagged = resolve_build(parse_build_spec(f"{repo}@main"))
    assert tagged.identity["version"] == "0.5.22"
    assert tagged.identity["version_from"] == "tag v0.5.22"
    (package / "_version.py").write_text("__version__ = version = '0.5.23'\n")
    commit_all(repo, "made from a wheel: setuptools-scm's file")
    made = resolve_build(parse_build_spec(f"{repo}@main"))
    assert made.identity["version"] == "0.5.23"
    assert made.identity["version_from"] == "sglang/_version.py"


def test_a_gpu_host_installs_the_checkout_as_before(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    repo = sglang_checkout(tmp_path / "sglang")
    monkeypatch.setenv("HARNESS_SGLANG_DEVICE", "cuda")
    resolved = resolve_build(parse_build_spec(f"{repo}@main"))
    assert resolved.method == "install" and resolved.base is None
    assert set(resolved.identity) == {"kind", "pip_args", "commit", "source", "subdirectory",
                                      "patch"}
    assert resolved.env_dir.name == f"sglang-{resolved.key}"


# ---- bad input -------------------------------------------------------------------------

def test_no_version_file(tmp_path: Path) -> None:
    repo = sglang_checkout(tmp_path / "sglang")
    (repo / "python" / "sglang" / "version.py").unlink()
    commit_all(repo, "no version file")
    with pytest.raises(BadInput, match=r"no python/sglang/version\.py in it"):
        resolve_build(parse_build_spec(f"{repo}@main"))


@pytest.mark.parametrize(("text", "message"), [
    ("__version__ = \n", "does not parse"),
    ("__version__ = compute()\n", r"not a string literal \(compute\(\)\)"),
    ("__version__ = 'the latest'\n", "'the latest' is not a version"),
])
def test_unparseable_version(tmp_path: Path, text: str, message: str) -> None:
    repo = sglang_checkout(tmp_path / "sglang")
    (repo / "python" / "sglang" / "version.py").write_text(text)
    commit_all(repo, "a bad version file")
    with pytest.raises(BadInput, match=message) as caught:
        resolve_build(parse_build_spec(f"{repo}@main"))
    assert "python/sglang/version.py" in caught.value.message  # named where it is


@given(st.text(max_size=200))
def test_any_version_file_is_a_version_none_or_bad_input(text: str) -> None:
    version = parsed_or_refused(lambda: read_version(text, "PATH"))
    assert version is None or isinstance(version, str)


def test_dependencies_compare_after_the_cuda_only_rule() -> None:
    checkout = project_dependencies(PYPROJECT, "PATH")
    assert dependency_difference(checkout, RELEASE_KEPT, "PATH") == ([], [])
    check_dependencies(checkout, RELEASE_KEPT, "PATH", "sglang==0.5.23")  # no error
    check_dependencies(None, RELEASE_KEPT, "PATH", "sglang==0.5.23")  # no pyproject.toml


def test_a_dependency_mismatch_names_both_sides() -> None:
    checkout = project_dependencies(PYPROJECT.replace("5.19.0", "5.20.0").replace(
        '    "numpy",\n', '    "numpy",\n    "xgrammar==0.2.8",\n'), "PATH")
    with pytest.raises(BadInput) as caught:
        check_dependencies(checkout, RELEASE_KEPT, "PATH@abc", "sglang==0.5.23")
    message = caught.value.message
    assert "--sglang PATH@abc" in message
    assert "has Transformers==5.20.0, xgrammar==0.2.8;" in message
    assert "sglang==0.5.23's CPU environment has transformers==5.19.0" in message


@pytest.mark.parametrize(("text", "message"), [
    ("[project\n", "does not parse"),
    ('[project]\ndynamic = ["dependencies"]\n', "dynamic"),
    ("[project]\ndependencies = [1]\n", "not a list of strings"),
])
def test_a_bad_pyproject_is_bad_input(text: str, message: str) -> None:
    with pytest.raises(BadInput, match=message):
        project_dependencies(text, "PATH")


@given(st.text(max_size=300))
def test_any_pyproject_is_dependencies_or_bad_input(text: str) -> None:
    found = parsed_or_refused(lambda: project_dependencies(text, "PATH"))
    assert found is None or all(isinstance(line, str) for line in found)


def test_a_version_with_no_release_is_a_clear_error(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Real pip, offline: an empty folder of wheels has no sglang==9.9.9."""
    (tmp_path / "wheels").mkdir()
    monkeypatch.setenv("HARNESS_PIP_ARGS", f"--no-index --find-links {tmp_path / 'wheels'}")
    repo = sglang_checkout(tmp_path / "sglang", "9.9.9")
    resolved = resolve_build(parse_build_spec(f"{repo}@main"))
    with pytest.raises(BadInput, match=r"version\.py says 9\.9\.9, and sglang==9\.9\.9 has no "
                       "release pip can download"):
        env_module._install(resolved)
    assert not resolved.env_dir.exists()  # nothing half-made left


def test_other_release_failures_stay_engine_errors() -> None:
    error = EngineError("pip install failed: disk full")
    assert release_error(error, "0.5.23", "PATH") is error


# ---- installing: the release's environment, the dependency check ------------------------

def test_install_is_the_releases_env_checked(tmp_path: Path, cpu_host: Path) -> None:
    env = released_env(cpu_host)
    repo = sglang_checkout(tmp_path / "sglang")
    resolved = resolve_build(parse_build_spec(f"{repo}@main"))
    assert env_module._install(resolved) == str(env / "bin" / "python")
    (repo / "python" / "pyproject.toml").write_text(PYPROJECT.replace('"numpy",', '"scipy",'))
    changed = resolve_build(parse_build_spec(str(repo)))
    with pytest.raises(BadInput, match=r"the checkout's python/pyproject\.toml has scipy; "
                       r"sglang==0\.5\.23's CPU environment has numpy"):
        env_module._install(changed)


# ---- the tree that runs: snapshot, patches, provenance -----------------------------------

def _diff(repo: Path, new: str) -> str:
    source = repo / "python" / "sglang" / "srt" / "dflash.py"
    old = source.read_text()
    source.write_text(new)
    text = git(repo, "diff") + "\n"
    source.write_text(old)
    return text


def test_the_overlay_tree_is_the_commit_plus_patches(tmp_path: Path, cpu_host: Path) -> None:
    env = released_env(cpu_host)
    repo = sglang_checkout(tmp_path / "sglang")
    first = git(repo, "rev-parse", "HEAD")
    (repo / "python" / "sglang" / "srt" / "new_in_the_checkout.py").write_text("X = 1\n")
    second = commit_all(repo, "a file the release has not")
    user = tmp_path / "revert.diff"
    user.write_text(_diff(repo, DFLASH.replace("DECODER", "ENCODER_ONLY")))
    suite = tmp_path / "cpu.diff"
    suite.write_text(_diff(repo, DFLASH.replace("return 1", "return 2")))
    (repo / "python" / "sglang" / "srt" / "dflash.py").write_text("uncommitted\n")  # not @REF

    def tree(ref: str, patch: Path | None = None) -> EnvironmentFacts:
        build = parse_build_spec(f"{repo}@{ref}", patch)
        resolved = resolve_build(build)
        return env_module._with_patches(build, facts_of(env), resolved, [suite])

    at_second = tree(second, user)
    root = Path(at_second.patched_tree or "")
    dflash = (root / "sglang" / "srt" / "dflash.py").read_text()
    assert "ENCODER_ONLY" in dflash and "return 2" in dflash  # user's, then the suite's
    assert (root / "sglang" / "srt" / "new_in_the_checkout.py").is_file()  # the commit's
    assert (root / "sglang-0.5.23.dist-info" / "METADATA").is_file()  # the release's
    assert [p["role"] for p in at_second.patches] == ["--patch", "engine.test_patches"]
    note = json.loads((root.parent / NOTE).read_text())
    assert note["overlay"] is True
    # a checkout holds no built extension: the release's, at the same place, listed
    so = "srt/rust/_server.cpython-311-x86_64-linux-gnu.so"
    assert (root / "sglang" / so).read_bytes() == b"\x7fELF release"
    assert note["compiled_from_release"] == [so]
    assert at_second.patched_source == f"sha256:{folder_sha256(root / 'sglang')}"
    # the same commit: the same tree, reused; another commit: another tree
    made = (root.parent / NOTE).stat().st_mtime_ns
    assert tree(second, user).patched_tree == at_second.patched_tree
    assert (root.parent / NOTE).stat().st_mtime_ns == made
    at_first = tree(first)
    assert at_first.patched_tree != at_second.patched_tree
    assert not (Path(at_first.patched_tree or "") / "sglang" / "srt" /
                "new_in_the_checkout.py").exists()
    # what the record says
    info = env_module.build_info(parse_build_spec(f"{repo}@{second}", user), at_second)
    release = resolve_build(parse_build_spec("sglang==0.5.23"))
    assert info.method == "overlay" and info.git_sha == second and info.ref == second
    assert info.base == {"spec": "sglang==0.5.23", "key": release.key}
    assert info.build_key == release.key and info.source_hash == at_second.patched_source
    assert info.patch_sha256 is not None and info.git_dirty is False
    assert at_second.build_note and at_second.build_note["installed"]["recipe"] == "sglang-cpu-1"


def test_a_checkout_without_a_patch_still_overlays(tmp_path: Path, cpu_host: Path) -> None:
    env = released_env(cpu_host)
    repo = sglang_checkout(tmp_path / "sglang")
    own = repo / "python" / "sglang" / "srt" / "rust" / "_server.cpython-311-x86_64-linux-gnu.so"
    own.parent.mkdir()
    own.write_bytes(b"\x7fELF the checkout's own build")
    commit_all(repo, "a checkout with its extension built in place")
    build = parse_build_spec(f"{repo}@main")
    facts = env_module._with_patches(build, facts_of(env), resolve_build(build), [])
    assert facts.patched_tree is not None and facts.patches == ()
    assert Path(facts.sglang_parent or "") == Path(facts.patched_tree)
    tree = Path(facts.patched_tree)
    assert (tree / "sglang" / own.relative_to(repo / "python" / "sglang")).read_bytes() == \
        own.read_bytes()  # its own kept
    assert json.loads((tree.parent / NOTE).read_text())["compiled_from_release"] == []


def test_a_checkout_edited_while_building_is_an_error(tmp_path: Path, cpu_host: Path) -> None:
    env = released_env(cpu_host)
    repo = sglang_checkout(tmp_path / "sglang")
    build = parse_build_spec(str(repo))  # the working tree
    resolved = resolve_build(build)
    (repo / "python" / "sglang" / "srt" / "dflash.py").write_text("edited since\n")
    with pytest.raises(HarnessError, match="changed while it was being built"):
        env_module._with_patches(build, facts_of(env), resolved, [])
    assert not any(p.name.endswith(".building-" + str(os.getpid()))
                   for p in (cpu_host / "patched").iterdir())


def test_a_plain_folder_and_the_dry_runs_interpreter(tmp_path: Path) -> None:
    """A folder outside git is keyed by its files; a dry run names the release's python."""
    from harness.builds import planned_python

    repo = sglang_checkout(tmp_path / "sglang")
    folder = tmp_path / "plain"
    (folder / "python").mkdir(parents=True)
    for name in ("sglang", "pyproject.toml"):
        source = repo / "python" / name
        if source.is_dir():
            shutil.copytree(source, folder / "python" / name)
        else:
            (folder / "python" / name).write_text(source.read_text())
    plain = resolve_build(parse_build_spec(str(folder)))
    release = resolve_build(parse_build_spec("sglang==0.5.23"))
    assert plain.method == "overlay" and plain.commit is None
    assert plain.source_hash is not None and plain.source_hash.startswith("sha256:")
    assert planned_python(parse_build_spec(str(folder))) == str(
        release.env_dir / "bin" / "python")
    (folder / "python" / "sglang" / "srt" / "dflash.py").write_text("changed\n")
    assert resolve_build(parse_build_spec(str(folder))).key != plain.key
