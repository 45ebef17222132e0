"""Secrets never reach a log, a record, a plot or a summary.

A secret is the value of an environment variable whose name looks like a credential
(`HF_TOKEN`, `*_API_KEY`, ...), the value of a secret flag on a command line
(SGLang 0.5.23's `--api-key`, `--admin-api-key`, `--ssl-keyfile-password`,
`--watermark-key`, `--watermark-key-b`; `--hf-token`, `--token`), or the user part of a
URL (`git+https://user:TOKEN@host/...`). The server still gets the real values: only
what the harness writes is redacted.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

REDACTED = "<redacted>"
SECRET_WORDS = re.compile(r"TOKEN|SECRET|KEY|PASSWORD|PASSWD|AUTH|CREDENTIAL|COOKIE", re.I)
# Names that contain a secret word but hold none: a key that is only a file path, and
# SGLang's many "tokens" settings (counts, not credentials).
NOT_SECRET_NAMES = re.compile(r"TOKENS|TOKENIZER|KEYFILE$|_KEY_?FILE|MAX_.*TOKEN", re.I)
SECRET_FLAGS = frozenset({"--api-key", "--admin-api-key", "--ssl-keyfile-password",
                          "--watermark-key", "--watermark-key-b", "--hf-token", "--token"})
_URL_USERINFO = re.compile(r"://[^/@\s]+@")


def is_secret_name(name: str) -> bool:
    return bool(SECRET_WORDS.search(name)) and not NOT_SECRET_NAMES.search(name)


def redact_url(text: str) -> str:
    """`git+https://user:TOKEN@host/...` -> `git+https://<redacted>@host/...`."""
    return _URL_USERINFO.sub(f"://{REDACTED}@", text)


def _is_secret_flag(flag: str) -> bool:
    return flag in SECRET_FLAGS


def secret_values(env: Mapping[str, str] = {}, argv: Sequence[str] = ()) -> tuple[str, ...]:
    """Every secret value in an environment and a command line (to redact wherever seen)."""
    found = [value for name, value in env.items() if is_secret_name(name) and value]
    for i, arg in enumerate(argv):
        flag, sep, value = arg.partition("=")
        if _is_secret_flag(flag):
            if sep and value:
                found.append(value)
            elif not sep and i + 1 < len(argv):
                found.append(argv[i + 1])
        for match in _URL_USERINFO.finditer(arg):
            found.append(match.group(0)[3:-1])
    # Longest first, so a secret containing another is replaced whole.
    return tuple(sorted({v for v in found if len(v) >= 4}, key=len, reverse=True))


def redact_argv(argv: Sequence[str]) -> list[str]:
    """A command line with secret flag values and URL credentials replaced."""
    out: list[str] = []
    hide_next = False
    for arg in argv:
        if hide_next:
            out.append(REDACTED)
            hide_next = False
            continue
        flag, sep, _ = arg.partition("=")
        if _is_secret_flag(flag):
            out.append(f"{flag}={REDACTED}" if sep else arg)
            hide_next = not sep
            continue
        out.append(redact_url(arg))
    return out


def redact_env(env: Mapping[str, str]) -> dict[str, str]:
    """An environment with secret-looking variables' values replaced (names kept)."""
    return {name: (REDACTED if is_secret_name(name) else redact_url(value))
            for name, value in env.items()}


def redact_text(text: str, secrets: Iterable[str]) -> str:
    """Replace each known secret value anywhere in a text (a log, a title, a summary)."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, REDACTED)
    return redact_url(text)
