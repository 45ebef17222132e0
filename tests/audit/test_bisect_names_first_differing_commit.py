"""`harness audit --bisect`: the first commit whose table differs, on repositories built here."""

from __future__ import annotations

import json
import subprocess
import zipfile
from pathlib import Path

import pytest

from harness import cli
from harness.audit.history import BisectError, bisect
from harness.audit.source import PATCHES_FILE, transformers_from_metadata
from harness.commands import COMMANDS

from .conftest import gemma4_dflash, transformers_env, wheel_for, with_is_causal
from .fake_sglang import PINNED_TRANSFORMERS, REGRESSED_MODEL, UTILS

SLIDING = "_get_dflash_attention_type(config)\n    raise"
FIXED_MODEL = REGRESSED_MODEL.replace(
    "def _get_dflash_attention_type(config) -> AttentionType:\n"
    "    text_config = config.get_text_config()\n"
    '    is_causal = getattr(text_config, "is_causal", None)\n',
    "def _get_dflash_attention_type(config, default=AttentionType.ENCODER_ONLY):\n"
    "    text_config = config.get_text_config()\n"
    '    is_causal = getattr(text_config, "is_causal", None)\n'
    "    if is_causal is None:\n"
    "        return default\n",
).replace(SLIDING, SLIDING.replace("(config)", "(config, default=AttentionType.DECODER)"))
FLIPPED_MODEL = FIXED_MODEL.replace("default=AttentionType.DECODER)",
                                    "default=AttentionType.ENCODER_ONLY)")
assert FIXED_MODEL.count("default=") == 2 and FLIPPED_MODEL != FIXED_MODEL
MODEL = "python/sglang/srt/models/dflash.py"
UTILS_PATH = "python/sglang/srt/speculative/dflash_utils.py"


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                          check=True).stdout.strip()  # fmt: skip


def commit(repo: Path, subject: str, files: dict[str, str]) -> str:
    for path, text in files.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text)
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", subject)
    return git(repo, "rev-parse", "HEAD")


def pyproject(pin: str) -> str:
    return f'[project]\nname = "sglang"\ndependencies = ["{pin}"]\n'


@pytest.fixture
def history(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """good -> unrelated -> no-op resolver edit -> the default flip -> later edit -> bad."""
    repo = tmp_path / "sglang"
    repo.mkdir()
    git(repo, "init", "-q")
    shas = {
        "good": commit(repo, "DFlash resolver honours is_causal", {
            MODEL: FIXED_MODEL, UTILS_PATH: UTILS,
            "python/pyproject.toml": pyproject(PINNED_TRANSFORMERS)}),
        "docs": commit(repo, "docs: unrelated", {"README.md": "hello\n"}),
        "noop": commit(repo, "dflash: comment only", {MODEL: FIXED_MODEL + "\n# tidy\n"}),
        "flip": commit(repo, "dflash: sliding layers default to bidirectional",
                       {MODEL: FLIPPED_MODEL + "\n# tidy\n"}),
        "later": commit(repo, "dflash utils: a later edit", {UTILS_PATH: UTILS + "\n# later\n"}),
    }
    git(repo, "tag", "good", shas["good"])
    git(repo, "tag", "bad", shas["later"])
    transformers_env(PINNED_TRANSFORMERS)
    return repo, shas


@pytest.fixture
def gemma4(write_config) -> Path:
    return write_config(gemma4_dflash())


def test_bisect_names_the_commit_that_flips_the_default(history, gemma4) -> None:
    repo, shas = history
    result = bisect(gemma4, repo, "good", "bad")
    # only commits touching the resolver files are walked, oldest first
    assert [r.source.commit for r in result.candidates] == [shas[k] for k in
                                                            ("noop", "flip", "later")]
    assert result.first is not None and result.first.source.commit == shas["flip"]
    assert result.first.source.subject == "dflash: sliding layers default to bidirectional"
    assert result.before is not None and result.before.source.commit == shas["noop"]
    assert result.before.cells() == [(True, 2048)] * 4 + [(False, None)]
    assert result.first.cells() == [(False, 2048)] * 4 + [(False, None)]


def test_bisect_cli_prints_commit_subject_and_both_tables(history, gemma4, capsys,
                                                          monkeypatch) -> None:
    monkeypatch.setattr(cli, "COMMANDS", {"audit": COMMANDS["audit"]})
    repo, shas = history
    assert cli.main(["audit", str(gemma4), "--bisect", "good", "bad", "--repo", str(repo)]) == 0
    out = capsys.readouterr().out
    assert f"{shas['flip']} dflash: sliding layers default to bidirectional" in out
    assert "before" in out and "after" in out and "bidir/2048*" in out and "causal/2048*" in out
    assert cli.main(["audit", str(gemma4), "--bisect", "good", "bad", "--repo", str(repo),
                     "--json"]) == 0  # fmt: skip
    report = json.loads(capsys.readouterr().out)
    assert report["first_different"]["commit"] == shas["flip"]
    assert report["change"] == [f"layer {i}: causal/2048* -> bidir/2048*" for i in range(4)]


def test_bisect_without_a_change_exits_1(history, write_config, capsys, monkeypatch) -> None:
    monkeypatch.setattr(cli, "COMMANDS", {"audit": COMMANDS["audit"]})
    repo, _ = history
    explicit = write_config(with_is_causal(gemma4_dflash(), True))  # no default to flip
    argv = ["audit", str(explicit), "--bisect", "good", "bad", "--repo", str(repo)]
    assert cli.main(argv) == 1
    assert "no commit between them changes the table" in capsys.readouterr().out


def test_bad_refs_and_repos_are_clear(history, gemma4, tmp_path) -> None:
    repo, _ = history
    with pytest.raises(BisectError, match="has no commit 'nope'"):
        bisect(gemma4, repo, "nope", "bad")
    with pytest.raises(BisectError, match="not an ancestor"):
        bisect(gemma4, repo, "bad", "good")
    with pytest.raises(BisectError, match="no such folder"):
        bisect(gemma4, tmp_path / "missing", "good", "bad")


def _release_files(version: str) -> dict[str, str]:
    with zipfile.ZipFile(wheel_for(version)) as wheel:
        names = {"sglang/srt/models/dflash.py", "sglang/srt/speculative/dflash_utils.py",
                 PATCHES_FILE}  # fmt: skip
        files = {f"python/{name}": wheel.read(name).decode() for name in names}
        metadata = next(n for n in wheel.namelist() if n.endswith(".dist-info/METADATA"))
        pin = transformers_from_metadata(wheel.read(metadata).decode())
    assert pin is not None
    return {**files, "python/pyproject.toml": pyproject(pin)}


def test_bisect_across_the_0_5_17_to_0_5_18_release_boundary(tmp_path, write_config) -> None:
    """The real fix, as shipped: 0.5.17's and 0.5.18's files as two commits of a history."""
    old, new = _release_files("0.5.17"), _release_files("0.5.18")
    repo = tmp_path / "sglang"
    repo.mkdir()
    git(repo, "init", "-q")
    commit(repo, "v0.5.17 resolver", old)
    git(repo, "tag", "v0.5.17")
    commit(repo, "unrelated", {"README.md": "x\n"})
    fix = commit(repo, "v0.5.18 resolver (honours is_causal)", new)
    git(repo, "tag", "v0.5.18")
    transformers_env("transformers==5.12.1")
    config = write_config(with_is_causal(gemma4_dflash(), False))
    result = bisect(config, repo, "v0.5.17", "v0.5.18")
    assert result.first is not None and result.first.source.commit == fix
    assert result.before is not None
    assert result.before.cells() == [(True, 2048)] * 4 + [(False, None)]  # legacy ignored it
    assert result.first.cells() == [(False, 2048)] * 4 + [(False, None)]  # explicit false wins
