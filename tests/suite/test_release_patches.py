"""Per-release test patches (`{version}` in engine.test_patches): the entry's grammar, the
file a release resolves to, and the refusal of a release with none, before its build."""

from __future__ import annotations

import string
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.builds import REPO_ROOT, parse_build_spec
from harness.errors import BadInput
from harness.suite.release_patches import (
    check_entry,
    for_release,
    patch_files,
    releases_with_file,
    shown,
)

SUITE = REPO_ROOT / "suites" / "tiny_dflash_sglang_cpu.toml"
SHIPPED = ("0.5.18", "0.5.19", "0.5.20", "0.5.21", "0.5.22", "0.5.23")


@pytest.mark.parametrize("entry", ["a.diff", "p/sglang-{version}-x.diff", "/abs/{version}.diff"])
def test_a_plain_path_or_one_version_field_in_the_name_is_accepted(entry: str) -> None:
    assert check_entry(entry) == entry


@pytest.mark.parametrize(("entry", "why"), [
    ("p/{release}.diff", r"\{release\} is not a field"),
    ("p/{version!r}.diff", r"\{version!r\} is not a field"),
    ("p/{version:>8}.diff", r"\{version:>8\} is not a field"),
    ("p/{}.diff", r"\{\} is not a field"),
    ("p/{version.x}.diff", r"is not a field"),
    ("p/{version.diff", "only field is"),
    ("p/version}.diff", "only field is"),
    ("p/{{version}}.diff", "escaped brace"),
    ("{version}/x.diff", "in the file's name"),
    ("p/{version}-{version}.diff", "goes once"),
])
def test_any_other_brace_is_refused_naming_it(entry: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        check_entry(entry)


@given(st.text(alphabet=string.ascii_letters + "{}/.-!:_ 0123456789", max_size=40))
def test_an_entry_is_accepted_or_refused_with_a_value_error(entry: str) -> None:
    try:
        check_entry(entry)
    except ValueError as error:
        assert repr(entry) in str(error)
        return
    # accepted: a release's file name has no brace left, and the path keeps its folder
    named = for_release(entry, "0.5.22")
    assert "{" not in named and "}" not in named
    assert named.rpartition("/")[0] == entry.rpartition("/")[0]


@given(st.text(max_size=20))
def test_a_release_is_never_a_path(release: str) -> None:
    try:
        named = for_release("p/sglang-{version}.diff", release)
    except ValueError as error:
        assert "is not a release" in str(error)
        return
    assert named.count("/") == 1 and ".." not in named.split("/")


def test_the_shipped_entry_has_a_patch_for_each_release_from_0_5_18() -> None:
    from harness.suite.model import load_suite

    [entry] = load_suite(SUITE).suite.engine.test_patches
    assert releases_with_file(entry, REPO_ROOT) == list(SHIPPED)
    for release in SHIPPED:
        [path] = patch_files([entry], REPO_ROOT, release, "here")
        assert path == REPO_ROOT / "tests" / "cpu_patches" / f"sglang-{release}-dflash-cpu.diff"


def test_a_release_without_a_patch_is_refused_naming_it_and_those_with_one(
        tmp_path: Path) -> None:
    (tmp_path / "p").mkdir()
    for release in ("0.5.9", "0.5.10"):
        (tmp_path / "p" / f"s-{release}.diff").write_text("x")
    entries = ["p/s-{version}.diff"]
    assert releases_with_file(entries[0], tmp_path) == ["0.5.9", "0.5.10"]  # as versions
    with pytest.raises(BadInput, match=r"suite s: engine\.test_patches: no test patch for "
                       r"sglang '0\.5\.8': p/s-\{version\}\.diff names no file for it "
                       r"\(releases with one: 0\.5\.9, 0\.5\.10\)"):
        patch_files(entries, tmp_path, "0.5.8", "suite s: engine.test_patches")
    with pytest.raises(BadInput, match=r"no test patch for sglang '\.\./x'"):
        patch_files(entries, tmp_path, "../x", "suite s")
    # checked alone (no build yet): one release's file is enough; none is an error
    assert patch_files(entries, tmp_path, None, "suite s") == []
    with pytest.raises(BadInput, match=r"suite s: q/\{version\}\.diff: no such file for any "
                       "release"):
        patch_files(["q/{version}.diff"], tmp_path, None, "suite s")
    # a plain entry is the same file for every release
    with pytest.raises(BadInput, match=r"suite s: no such file .*plain\.diff"):
        patch_files(["plain.diff"], tmp_path, "0.5.9", "suite s")


def test_a_pinned_pip_build_names_its_release_and_others_do_not() -> None:
    assert parse_build_spec("sglang==0.5.22").release == "0.5.22"
    assert parse_build_spec("0.5.21").release == "0.5.21"
    for spec in ("sglang>=0.5.20", "sglang==0.5.*", "sglang", "sglang>0.5,<0.6"):
        assert parse_build_spec(spec).release is None, spec
    assert parse_build_spec("git+https://github.com/sgl-project/sglang@v0.5.22#subdirectory="
                            "python").release is None
    assert shown(["p/{version}.diff", "q.diff"], "0.5.22") == ["p/0.5.22.diff", "q.diff"]
    assert shown(["p/{version}.diff"], None) == ["p/{version}.diff"]


def test_the_suite_refuses_a_bad_entry_when_read(tmp_path: Path) -> None:
    from harness.suite.model import load_suite

    text = SUITE.read_text().replace("sglang-{version}-dflash-cpu.diff",
                                     "sglang-{release}-dflash-cpu.diff")
    suite = tmp_path / "bad.toml"
    suite.write_text(text)
    with pytest.raises(BadInput, match=r"engine\.test_patches.*\{release\} is not a field"):
        load_suite(suite)


def test_a_run_of_a_release_without_a_patch_stops_before_its_build(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """sglang==0.5.17 has no DFLASH test patch: exit 2 naming it, nothing built (the dry
    run's plan refuses it the same way), and the plan names each release's own patch."""
    from harness.cli import main

    monkeypatch.setenv("HARNESS_SGLANG_DEVICE", "cpu")
    monkeypatch.setenv("HARNESS_CACHE", str(tmp_path / "cache"))
    for dry in ([], ["--dry-run"]):
        code = main(["run", "tiny_dflash_sglang_cpu", "--sglang", "sglang==0.5.17",
                     "--results", str(tmp_path / "results"), "--no-progress", *dry])
        err = capsys.readouterr().err
        assert code == 2, err
        assert "no test patch for sglang '0.5.17'" in err
        assert "releases with one: 0.5.18, 0.5.19, 0.5.20, 0.5.21, 0.5.22, 0.5.23" in err
        assert "Traceback" not in err
    assert not (tmp_path / "cache" / "envs").exists()
    assert main(["run", "tiny_dflash_sglang_cpu", "--sglang", "sglang==0.5.20",
                 "--dry-run"]) == 0
    assert "test patch tests/cpu_patches/sglang-0.5.20-dflash-cpu.diff" in \
        capsys.readouterr().out
