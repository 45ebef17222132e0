"""Loading a draft config from a file, a folder or the hub."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.audit.config import load_draft_config
from harness.suite.attention import DraftConfigError

from .conftest import gemma4_dflash


def test_file_and_folder(write_config) -> None:
    path = write_config(gemma4_dflash())
    assert load_draft_config(path) == (gemma4_dflash(), str(path))
    assert load_draft_config(path.parent)[0] == gemma4_dflash()


def test_folder_without_config(tmp_path: Path) -> None:
    with pytest.raises(DraftConfigError, match=r"folder has no config\.json"):
        load_draft_config(tmp_path)


@pytest.mark.parametrize(
    ("text", "message"), [("{not json", "not valid JSON"), ("[1]", "must be a JSON object")]
)
def test_not_a_json_object(write_config, text: str, message: str) -> None:
    with pytest.raises(DraftConfigError, match=message):
        load_draft_config(write_config(text))


def test_hub_id_uses_hf_hub_download(write_config, monkeypatch) -> None:
    cached = write_config(gemma4_dflash())
    calls = []

    def download(repo_id, filename, revision=None, local_files_only=False):
        calls.append((repo_id, filename, revision, local_files_only))
        return str(cached)

    monkeypatch.setattr("huggingface_hub.hf_hub_download", download)
    config, origin = load_draft_config("z-lab/gemma-4-31B-it-DFlash", revision="main")
    assert config == gemma4_dflash() and origin.startswith("z-lab/gemma-4-31B-it-DFlash")
    assert calls == [("z-lab/gemma-4-31B-it-DFlash", "config.json", "main", False)]


def test_hub_unreachable_and_not_cached(monkeypatch) -> None:
    def download(repo_id, filename, revision=None, local_files_only=False):
        raise OSError("offline" if not local_files_only else "not in cache")

    monkeypatch.setattr("huggingface_hub.hf_hub_download", download)
    with pytest.raises(DraftConfigError, match="not reachable and not in the Hugging Face cache"):
        load_draft_config("z-lab/no-such-draft")


def test_neither_path_nor_hub_id() -> None:
    with pytest.raises(DraftConfigError, match="no such config file or folder"):
        load_draft_config("missing/config.json")
