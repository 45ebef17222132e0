"""Build specs (`--sglang`, `--patch`) and applying a patch to a copy of a local checkout."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from harness.build import BuildSpec, _patched_copy, parse_build_spec
from harness.errors import BadInput, EngineError

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="needs the git executable")


def test_installed_by_default() -> None:
    assert parse_build_spec(None) == BuildSpec("installed")


@pytest.mark.parametrize("spec", ["sglang==0.5.23", "sglang>=0.5.18,<0.6", "sglang[all]==0.5.23",
                                  "sglang @ https://example.invalid/sglang-0.5.23.whl"])
def test_pip_requirement(spec: str) -> None:
    assert parse_build_spec(spec) == BuildSpec("pip", spec)


@pytest.mark.parametrize("spec", [
    "git+https://github.com/sgl-project/sglang@4e88ae20#subdirectory=python",
    "git+https://github.com/sgl-project/sglang.git@v0.5.23#subdirectory=python",
    "https://github.com/sgl-project/sglang.git",
])
def test_git_url(spec: str) -> None:
    build = parse_build_spec(spec)
    assert build.kind == "git" and build.spec == spec and build.patch is None


def test_local_checkout(tmp_path: Path) -> None:
    checkout = tmp_path / "sglang"
    checkout.mkdir()
    build = parse_build_spec(str(checkout))
    assert build == BuildSpec("local", str(checkout.resolve()))


def test_local_file_is_not_a_checkout(tmp_path: Path) -> None:
    wheel = tmp_path / "sglang.whl"
    wheel.write_text("")
    with pytest.raises(BadInput, match="a local build must be a checkout folder"):
        parse_build_spec(str(wheel))


def test_local_checkout_with_patch(tmp_path: Path) -> None:
    checkout = tmp_path / "sglang"
    checkout.mkdir()
    patch = tmp_path / "fix.diff"
    patch.write_text("diff\n")
    assert parse_build_spec(str(checkout), patch) == BuildSpec("local", str(checkout.resolve()),
                                                               patch)


@pytest.mark.parametrize("spec", [None, "sglang==0.5.23",
                                  "git+https://github.com/sgl-project/sglang@main"])
def test_patch_without_local_checkout(tmp_path: Path, spec: str | None) -> None:
    patch = tmp_path / "fix.diff"
    patch.write_text("diff\n")
    with pytest.raises(BadInput, match="--patch"):
        parse_build_spec(spec, patch)


def test_missing_patch_file(tmp_path: Path) -> None:
    checkout = tmp_path / "sglang"
    checkout.mkdir()
    with pytest.raises(BadInput, match="--patch: no such file"):
        parse_build_spec(str(checkout), tmp_path / "absent.diff")


@pytest.mark.parametrize("spec", ["not a spec!!", "./no/such/checkout", "sglang===", "=="])
def test_garbage_spec(spec: str) -> None:
    with pytest.raises(BadInput) as caught:
        parse_build_spec(spec)
    assert "not a pip requirement" in caught.value.message
    assert "git URL" in caught.value.message and "local checkout" in caught.value.message


def test_key_depends_on_spec_and_patch_content(tmp_path: Path) -> None:
    patch = tmp_path / "fix.diff"
    patch.write_text("one\n")
    with_one = BuildSpec("local", "/src/sglang", patch).key
    assert with_one == BuildSpec("local", "/src/sglang", patch).key  # stable
    patch.write_text("two\n")
    with_two = BuildSpec("local", "/src/sglang", patch).key
    without = BuildSpec("local", "/src/sglang").key
    assert len({with_one, with_two, without}) == 3
    assert BuildSpec("pip", "sglang==0.5.23").key != BuildSpec("pip", "sglang==0.5.17").key
    assert BuildSpec("pip", "x").key != BuildSpec("git", "x").key


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                          text=True).stdout


RESOLVER = (
    "def attention_type(is_causal, default):\n"
    "    if is_causal is None:\n"
    "        return 'bidirectional'\n"
    "    return 'causal' if is_causal else 'bidirectional'\n"
)
FIXED = RESOLVER.replace("return 'bidirectional'\n    return", "return default\n    return")


@pytest.fixture
def checkout_and_patch(tmp_path: Path) -> tuple[Path, Path]:
    checkout = tmp_path / "sglang"
    (checkout / "python" / "sglang").mkdir(parents=True)
    source = checkout / "python" / "sglang" / "dflash.py"
    source.write_text(RESOLVER)
    (checkout / "python" / "pyproject.toml").write_text("[project]\nname = 'sglang'\n")
    _git(checkout, "init", "-q")
    _git(checkout, "add", "-A")
    source.write_text(FIXED)
    patch = tmp_path / "fix.diff"
    patch.write_text(_git(checkout, "diff"))
    source.write_text(RESOLVER)  # the checkout itself stays unpatched
    return checkout, patch


@needs_git
def test_patched_copy_applies_a_git_diff(
    tmp_path: Path, checkout_and_patch: tuple[Path, Path]
) -> None:
    checkout, patch = checkout_and_patch
    assert "return default" in patch.read_text()
    build = parse_build_spec(str(checkout), patch)
    dest = _patched_copy(build, tmp_path / "copy")
    assert (dest / "python" / "sglang" / "dflash.py").read_text() == FIXED
    assert (checkout / "python" / "sglang" / "dflash.py").read_text() == RESOLVER
    assert not (dest / ".git").exists()
    # a second call starts again from a fresh copy (no "already applied" failure)
    dest = _patched_copy(build, tmp_path / "copy")
    assert (dest / "python" / "sglang" / "dflash.py").read_text() == FIXED


@needs_git
def test_patch_that_does_not_apply(tmp_path: Path, checkout_and_patch: tuple[Path, Path]) -> None:
    checkout, patch = checkout_and_patch
    (checkout / "python" / "sglang" / "dflash.py").write_text("something else entirely\n")
    build = parse_build_spec(str(checkout), patch)
    with pytest.raises(EngineError) as caught:
        _patched_copy(build, tmp_path / "copy")
    assert f"--patch {patch}" in caught.value.message
    assert "failed" in caught.value.message


@needs_git
def test_garbage_patch(tmp_path: Path, checkout_and_patch: tuple[Path, Path]) -> None:
    checkout, _ = checkout_and_patch
    garbage = tmp_path / "garbage.diff"
    garbage.write_text("this is not a diff\n")
    with pytest.raises(EngineError, match=r"garbage\.diff"):
        _patched_copy(parse_build_spec(str(checkout), garbage), tmp_path / "copy")
