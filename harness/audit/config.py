"""Load a draft's config.json: a file, a folder holding one, or a Hugging Face hub id."""

from __future__ import annotations

import os
import re
from pathlib import Path

from harness.suite.attention import DraftConfigError
from harness.suite.document import DocumentError, load_json

CONFIG_NAME = "config.json"
# `org/name`, as the hub spells repository ids; anything else is treated as a path.
_HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*/[A-Za-z0-9][A-Za-z0-9_.\-]*$")


def parse_config_text(text: str, source: str) -> dict[str, object]:
    """A draft config from JSON text; DraftConfigError when it is not a JSON object."""
    try:
        document = load_json(text)
    except DocumentError as error:  # not JSON, nested past parsing, a number not finite
        raise DraftConfigError(f"{source}: {error}") from None
    if not isinstance(document, dict):
        raise DraftConfigError(
            f"{source}: draft config must be a JSON object, got {type(document).__name__}"
        )
    return document


def _read(path: Path) -> dict[str, object]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise DraftConfigError(f"{path}: cannot read: {error}") from error
    return parse_config_text(text, str(path))


def _download_from_hub(repo_id: str, revision: str | None) -> Path:
    # Imported here: huggingface_hub is slow to import and only hub ids need it.
    from huggingface_hub import hf_hub_download

    try:
        return Path(hf_hub_download(repo_id, CONFIG_NAME, revision=revision))
    except Exception as online_error:
        # hf_hub_download already falls back to its cache on connection errors; ask the
        # cache alone too, so a refused revision check still finds a cached file.
        try:
            return Path(
                hf_hub_download(repo_id, CONFIG_NAME, revision=revision, local_files_only=True)
            )
        except Exception:
            raise DraftConfigError(
                f"{repo_id}: no such local file or folder, and the hub gave no {CONFIG_NAME} "
                f"(not reachable and not in the Hugging Face cache): "
                f"{type(online_error).__name__}: {online_error}"
            ) from online_error


def locate_draft_config(
    reference: str | os.PathLike[str], revision: str | None = None
) -> tuple[Path, str]:
    """(the config.json file, how to name it) for a config file, a checkpoint folder or a hub id."""
    path = Path(reference).expanduser()
    if path.is_dir():
        if not (path / CONFIG_NAME).is_file():
            raise DraftConfigError(f"{path}: folder has no {CONFIG_NAME}")
        path = path / CONFIG_NAME
    if path.is_file():
        return path, str(path)
    text = str(reference)
    if _HUB_ID.match(text) and not text.endswith(".json"):
        downloaded = _download_from_hub(text, revision)
        return downloaded, f"{text} ({downloaded})"
    raise DraftConfigError(f"{text}: no such config file or folder, and not a hub id (org/name)")


def load_draft_config(
    reference: str | os.PathLike[str], revision: str | None = None
) -> tuple[dict[str, object], str]:
    """(config, where it was read from) for a config file, a checkpoint folder or a hub id."""
    path, origin = locate_draft_config(reference, revision)
    return _read(path), origin
