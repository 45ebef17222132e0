"""The DFLASH CPU test patches against the releases' own wheels (tests/cpu_patches).

tiny_dflash_sglang_cpu names one test patch per release (`sglang-{version}-dflash-cpu.diff`).
Pinned here, from each cached wheel ($HARNESS_SGLANG_WHEELS; `nox -s tests` fetches them,
no test downloads): each release has SGLang's DFLASH worker and draft model; its patch
applies to its own `python/sglang/` tree and to no other release's (so a patch cannot
silently serve the wrong release); each ships PR #34524's sliding-layer default (the
contract the suite's expected_layers state); and the stand-ins' AMX answer
(tests/cpu_stand_ins/sitecustomize.py, through `runtime_context.override_platform`) has its
hook from 0.5.19 on only, so 0.5.18 is not served. Without the wheels these tests skip.
"""

from __future__ import annotations

import subprocess
import zipfile
from pathlib import Path

import pytest

from harness.builds import REPO_ROOT
from harness.builds.gitrepo import git_env
from harness.suite.release_patches import for_release, releases_with_file

from .conftest import wheel_for
from .test_releases_own_code import behaviour_read_from_wheel

ENTRY = "tests/cpu_patches/sglang-{version}-dflash-cpu.diff"
PATCHED = tuple(releases_with_file(ENTRY, REPO_ROOT))
DFLASH_FILES = ("sglang/srt/speculative/dflash_worker_v2.py",
                "sglang/srt/speculative/dflash_info.py", "sglang/srt/models/dflash.py")


def _patch(release: str) -> Path:
    return REPO_ROOT / for_release(ENTRY, release)


def _touched(patch: Path, outside: Path) -> list[str]:
    """The `python/sglang/...` files a patch changes (git's own reading of it, from a
    folder outside any repository: inside one, git reads paths from its root)."""
    done = subprocess.run(["git", "apply", "--numstat", "--include=python/sglang/*",
                           str(patch)], capture_output=True, text=True, check=True,
                          cwd=outside, env=git_env({"GIT_CEILING_DIRECTORIES": str(outside)}))
    return [line.split("\t", 2)[2] for line in done.stdout.splitlines()]


@pytest.fixture(scope="module")
def trees(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Per release, the wheel's files any patch touches, laid out as python/sglang/..."""
    outside = tmp_path_factory.mktemp("outside")
    members = sorted({f for release in PATCHED for f in _touched(_patch(release), outside)})
    assert "python/sglang/srt/models/dflash.py" in members
    out = {}
    for release in PATCHED:
        root = tmp_path_factory.mktemp(f"sglang-{release}")
        with zipfile.ZipFile(wheel_for(release)) as wheel:
            names = set(wheel.namelist())
            for member in members:
                inside = member.removeprefix("python/")
                if inside in names:
                    (root / member).parent.mkdir(parents=True, exist_ok=True)
                    (root / member).write_bytes(wheel.read(inside))
        out[release] = root
    return out


def _applies(patch: Path, tree: Path) -> bool:
    done = subprocess.run(["git", "apply", "--check", "--include=python/sglang/*",
                           str(patch)], cwd=tree, capture_output=True, text=True, check=False,
                          env=git_env({"GIT_CEILING_DIRECTORIES": str(tree.parent)}))
    return done.returncode == 0


def test_the_suite_has_a_patch_for_each_release_from_0_5_18() -> None:
    assert PATCHED == ("0.5.18", "0.5.19", "0.5.20", "0.5.21", "0.5.22", "0.5.23")


@pytest.mark.parametrize("release", PATCHED)
def test_each_release_has_the_dflash_worker_and_pr_34524s_default(release: str) -> None:
    with zipfile.ZipFile(wheel_for(release)) as wheel:
        names = set(wheel.namelist())
    assert [f for f in DFLASH_FILES if f not in names] == [], release
    assert behaviour_read_from_wheel(release) == "fixed", release


def test_each_patch_applies_to_its_own_release_only(trees: dict[str, Path]) -> None:
    table = {patch: [release for release, tree in trees.items()
                     if _applies(_patch(patch), tree)] for patch in PATCHED}
    assert table == {release: [release] for release in PATCHED}


def test_the_amx_answer_has_its_hook_from_0_5_19_on() -> None:
    """0.5.18's intel_amx fallback reads `cpu_has_amx_support()`, the same function the
    layers read; answering it yes would send norms and linear layers to AMX kernels the
    stand-in does not provide, so 0.5.18 has no served row."""
    def hook(release: str) -> bool:
        with zipfile.ZipFile(wheel_for(release)) as wheel:
            text = wheel.read("sglang/srt/runtime_context.py").decode()
        return "\ndef override_platform(" in text

    assert {release: hook(release) for release in PATCHED} == {
        release: release != "0.5.18" for release in PATCHED}


def test_the_kernel_stand_in_takes_the_scales_that_0_5_20_on_pass() -> None:
    """0.5.19 is refused at its first prefill (docs/sglang-on-cpu.md): it pins
    sglang-kernel 0.4.6.post1, whose `extend_attention_cpu` has no k_scale/v_scale, and its
    intel_amx backend passes req_to_token right after the value buffer; from 0.5.20 on the
    backend passes the two scales there, the schema the stand-in registers."""
    import ast

    source = REPO_ROOT / "tests" / "cpu_stand_ins" / "sgl_kernel" / "attention.py"
    found = [node for node in ast.parse(source.read_text()).body
             if isinstance(node, ast.FunctionDef) and node.name == "extend_attention_cpu"]
    names = [arg.arg for arg in found[0].args.args]
    assert names[names.index("v_buffer") + 1:names.index("req_to_token")] == [
        "k_scale", "v_scale"]

    def passes_scales(release: str) -> bool:
        with zipfile.ZipFile(wheel_for(release)) as wheel:
            text = wheel.read("sglang/srt/layers/attention/intel_amx_backend.py").decode()
        call = text[text.index("self.extend_attention_fwd("):]
        call = call[:call.index("req_to_token")]
        return "scale" in call

    assert {release: passes_scales(release) for release in PATCHED} == {
        release: release not in ("0.5.18", "0.5.19") for release in PATCHED}
