"""A built SGLang plus patches (harness/builds/patched.py): an installed package copied and
patched with `git apply`, the user's --patch first, then the suite's test patches."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from harness.builds import folder_sha256
from harness.builds.patched import NOTE, Patch, patched_tree, tree_key, tree_sha256
from harness.errors import BadInput, EngineError


def _site(tmp_path: Path) -> Path:
    """An installed package: site-packages/sglang/... and its dist-info."""
    site = tmp_path / "site-packages"
    (site / "sglang" / "srt").mkdir(parents=True)
    (site / "sglang" / "__init__.py").write_text("__version__ = '0.5.23'\n")
    (site / "sglang" / "srt" / "dflash.py").write_text(
        "def default():\n    return 'DECODER'\n\n\ndef other():\n    return 1\n")
    info = site / "sglang-0.5.23.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Name: sglang\nVersion: 0.5.23\n"
                                   "Requires-Dist: transformers==5.19.0\n")
    return site


def _diff(tmp_path: Path, name: str, path: str, old: str, new: str) -> Path:
    """A diff in SGLang's repository layout, made by git from a scratch repository."""
    repo = tmp_path / f"repo-{name}"
    file = repo / path
    file.parent.mkdir(parents=True)
    file.write_text(old)
    run = {"cwd": repo, "check": True, "capture_output": True, "text": True}
    subprocess.run(["git", "init", "-q"], **run)
    subprocess.run(["git", "add", "-A"], **run)
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x"],
                   **run)
    file.write_text(new)
    text = subprocess.run(["git", "diff"], **run).stdout
    out = tmp_path / f"{name}.diff"
    out.write_text(text)
    return out


def make(site: Path, base: str, patches: list[Patch]) -> Path:
    return patched_tree(site, base, patches, folder_sha256)


ORIGINAL = "def default():\n    return 'DECODER'\n\n\ndef other():\n    return 1\n"


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HARNESS_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_user_patch_then_test_patch_compose(tmp_path: Path, cache: Path) -> None:
    site = _site(tmp_path)
    revert = _diff(tmp_path, "revert", "python/sglang/srt/dflash.py", ORIGINAL,
                   ORIGINAL.replace("'DECODER'", "'ENCODER_ONLY'"))
    cpu = _diff(tmp_path, "cpu", "python/sglang/srt/dflash.py", ORIGINAL,
                ORIGINAL.replace("return 1", "return 2"))
    tree = make(site, "base", [Patch(revert, "--patch"),
                                       Patch(cpu, "engine.test_patches")])
    text = (tree / "sglang" / "srt" / "dflash.py").read_text()
    assert "'ENCODER_ONLY'" in text and "return 2" in text
    assert (site / "sglang" / "srt" / "dflash.py").read_text() == ORIGINAL  # untouched
    assert (tree / "sglang-0.5.23.dist-info" / "METADATA").is_file()  # the audit's pins
    note = json.loads((tree.parent / NOTE).read_text())
    assert [p["role"] for p in note["patches"]] == ["--patch", "engine.test_patches"]
    assert note["patches"][0]["files"] == ["python/sglang/srt/dflash.py"]
    assert tree_sha256(tree).startswith("sha256:")
    # the same inputs: the same tree, reused; another patch order or content: another one
    again = make(site, "base", [Patch(revert, "--patch"),
                                        Patch(cpu, "engine.test_patches")])
    assert again == tree
    assert tree_key("base", [Patch(cpu, "x")]) != tree_key("base", [Patch(revert, "x")])
    assert tree_key("base", [Patch(cpu, "x")]) != tree_key("other", [Patch(cpu, "x")])
    assert tree_sha256(make(site, "base", [Patch(cpu, "x")])) != tree_sha256(tree)


def test_parts_outside_the_package_are_left_out_and_listed(tmp_path: Path, cache: Path) -> None:
    site = _site(tmp_path)
    pr = _diff(tmp_path, "pr", "python/sglang/srt/dflash.py", ORIGINAL, ORIGINAL + "# pr\n")
    docs = _diff(tmp_path, "docs", "docs/notes.md", "a\n", "b\n")
    both = tmp_path / "both.diff"
    both.write_text(pr.read_text() + docs.read_text())
    tree = make(site, "base", [Patch(both, "--patch")])
    assert (tree / "sglang" / "srt" / "dflash.py").read_text().endswith("# pr\n")
    [applied] = json.loads((tree.parent / NOTE).read_text())["patches"]
    assert applied["left_out"] == ["docs/notes.md"]
    with pytest.raises(BadInput, match=r"changes no file under python/sglang/.*docs/notes\.md"):
        make(site, "base", [Patch(docs, "--patch")])


def test_a_patch_that_does_not_apply_names_itself(tmp_path: Path, cache: Path) -> None:
    site = _site(tmp_path)
    stale = _diff(tmp_path, "stale", "python/sglang/srt/dflash.py", "something else\n",
                  "changed\n")
    with pytest.raises(BadInput, match=r"--patch .*stale\.diff does not apply"):
        make(site, "base", [Patch(stale, "--patch")])
    assert not list((cache / "patched").glob("*.building-*"))  # nothing half-made kept
    clash_a = _diff(tmp_path, "a", "python/sglang/srt/dflash.py", ORIGINAL,
                    ORIGINAL.replace("'DECODER'", "'A'"))
    clash_b = _diff(tmp_path, "b", "python/sglang/srt/dflash.py", ORIGINAL,
                    ORIGINAL.replace("'DECODER'", "'B'"))
    with pytest.raises(BadInput, match=r"engine\.test_patches .*b\.diff does not apply .*"
                                       r"after the patches before it"):
        make(site, "base", [Patch(clash_a, "--patch"),
                                    Patch(clash_b, "engine.test_patches")])


def test_no_package_to_patch(tmp_path: Path, cache: Path) -> None:
    with pytest.raises(EngineError, match="no sglang package"):
        make(tmp_path, "base", [])


def test_a_release_plus_a_patch_shares_the_releases_environment(tmp_path: Path) -> None:
    """The environment is the release's (built once); the patch makes a tree beside it."""
    from harness.builds import parse_build_spec, resolve_build

    patch = _diff(tmp_path, "pr", "python/sglang/x.py", "a\n", "b\n")
    plain = resolve_build(parse_build_spec("sglang==0.5.23"))
    patched = resolve_build(parse_build_spec("sglang==0.5.23", patch))
    assert patched.key == plain.key and patched.build.patch == patch


def test_the_suite_declares_its_test_patches_and_a_missing_one_is_bad_input() -> None:
    from harness.builds import REPO_ROOT
    from harness.run.plan import check_suite, test_patch_files
    from harness.suite.model import load_suite

    loaded = load_suite(REPO_ROOT / "suites" / "tiny_dflash_sglang_cpu.toml")
    assert test_patch_files(loaded.suite) == []  # per release: none without a build
    [patch] = test_patch_files(loaded.suite, "0.5.23")
    assert patch == REPO_ROOT / "tests" / "cpu_patches" / "sglang-0.5.23-dflash-cpu.diff"
    engine = loaded.suite.engine.model_copy(update={"test_patches": ["tests/no_such.diff"]})
    broken = loaded.model_copy(update={"suite": loaded.suite.model_copy(
        update={"engine": engine})})
    with pytest.raises(BadInput, match=r"engine\.test_patches: no such file .*no_such\.diff"):
        check_suite(broken)


def test_the_dry_run_names_the_patches_in_their_order(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.cli import main

    monkeypatch.setenv("HARNESS_SGLANG_DEVICE", "cpu")
    monkeypatch.setenv("HARNESS_CACHE", str(tmp_path / "cache"))
    patch = _diff(tmp_path, "pr", "python/sglang/x.py", "a\n", "b\n")
    assert main(["run", "tiny_dflash_sglang_cpu", "--sglang", "sglang==0.5.23", "--patch",
                 str(patch), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert (f"patches    --patch {patch}; then test patch "
            "tests/cpu_patches/sglang-0.5.23-dflash-cpu.diff") in out
    assert not (tmp_path / "cache" / "patched").exists()  # a dry run patches nothing


def test_the_server_imports_the_patched_tree_and_records_its_kernel_calls() -> None:
    """The patched tree goes on the server's PYTHONPATH after the stand-ins (both before
    site-packages, where the release stays as installed); a DFLASH suite with stand-ins
    gets the runtime attention record, the other CPU suites do not."""
    import types

    from harness.builds import REPO_ROOT
    from harness.run import runtime_attention
    from harness.run.plan import server_env
    from harness.suite.model import load_suite

    suite = load_suite(REPO_ROOT / "suites" / "tiny_dflash_sglang_cpu.toml").suite
    facts = types.SimpleNamespace(build_note=None, patched_tree="/cache/patched/sglang-k/python")
    env = server_env(suite, None, facts)
    assert env["PYTHONPATH"].split(":") == [str(REPO_ROOT / "tests" / "cpu_stand_ins"),
                                            "/cache/patched/sglang-k/python"]
    assert runtime_attention.wanted(suite)
    for other in ("tiny_ngram_sglang_cpu", "tiny_standalone_sglang_cpu", "qwen3_8b_dflash"):
        assert not runtime_attention.wanted(load_suite(other).suite), other
