"""The target's chat template as shipped with its tokenizer: found, hashed, never rendered.

The chat protocol lets the server render the template (SGLang's /v1/chat/completions:
its own template handling, special tokens and `chat_template_kwargs`), so the harness
needs neither torch nor jinja. What the record keeps is the template's source hash and,
per request, the hash of the token ids the server rendered (`return_prompt_token_ids`).
Looked up without network: a local checkpoint folder, or the Hugging Face hub cache the
server filled when it loaded the model (`huggingface_hub.try_to_load_from_cache`).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from huggingface_hub import try_to_load_from_cache

TEMPLATE_FILES = ("chat_template.jinja", "tokenizer_config.json")


def _template_from(name: str, text: str) -> str | None:
    if name.endswith(".jinja"):
        return text
    try:
        config = json.loads(text)
    except (ValueError, RecursionError):  # not JSON, or nested past parsing: no template
        return None
    template: Any = config.get("chat_template") if isinstance(config, dict) else None
    if isinstance(template, list):  # named templates: [{"name", "template"}]
        named = {t.get("name"): t.get("template") for t in template if isinstance(t, dict)}
        template = named.get("default")
    return template if isinstance(template, str) and template else None


def _cached(model: str, filename: str, revision: str | None) -> Path | None:
    try:
        found = try_to_load_from_cache(model, filename, revision=revision)
    except Exception:  # not a repo id (a path, a typo): nothing cached under it
        return None
    return Path(found) if isinstance(found, str) else None


def template_source(model: str | None, revision: str | None = None,
                    override: str | None = None) -> tuple[str, str] | None:
    """(sha256 of the template text, where it was read) or None when it cannot be found.

    `override`: a template the server was told to use instead (a file, or a name the
    engine knows); a file is hashed, a name is recorded as such.
    """
    if override is not None:
        path = Path(override)
        if path.is_file():
            text = path.read_text(encoding="utf-8", errors="replace")
            return hashlib.sha256(text.encode()).hexdigest(), str(path)
        return hashlib.sha256(override.encode()).hexdigest(), f"engine template {override!r}"
    if not model:
        return None
    folder = Path(model)
    for name in TEMPLATE_FILES:
        file = folder / name if folder.is_dir() else _cached(model, name, revision)
        if file is None or not file.is_file():
            continue
        template = _template_from(name, file.read_text(encoding="utf-8", errors="replace"))
        if template is not None:
            return hashlib.sha256(template.encode()).hexdigest(), str(file)
    return None
