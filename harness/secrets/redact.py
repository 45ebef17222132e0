"""The one redactor. Free text, a command line, an environment and a document each have an
entry here, and every one ends in `redact_text`: registered values, then the shapes of a
credential. What an entry hides by position (a secret flag's value, a variable under a
secret name) it also registers, so that the value is replaced wherever else it appears.
The server still gets the real values: only what the harness prints or writes is redacted.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TypeVar

from harness.secrets.controls import escape, strip
from harness.secrets.flags import is_secret_flag, secret_flags
from harness.secrets.found import in_argv, in_document, in_env
from harness.secrets.names import is_secret_name
from harness.secrets.registry import REDACTED, register, replace_registered
from harness.secrets.shapes import looks_secret, mask_shapes


def redact_text(text: str) -> str:
    """A text as it may be printed or written: every registered value and every credential
    shape in it replaced by REDACTED. (A secret flag's value is hidden where it stands, in
    a command line, and registered; text is not read for flags: `--api-key as --api-k`
    is prose.)"""
    if not text:
        return text
    return mask_shapes(replace_registered(text))


def redact_argv(argv: Sequence[object], flags: Iterable[str] | None = None, *,
                own: bool = False) -> list[str]:
    """A command line with the values of its secret flags (in every form its parser reads:
    `flags` are its engine's, None any registered engine's; `own`: the harness's own line)
    and every other secret replaced."""
    args = [str(arg) for arg in argv]
    register(in_argv(args, flags, own=own))
    out: list[str] = []
    hide_next = False
    for arg in args:
        if hide_next:
            out.append(REDACTED)
            hide_next = False
        elif is_secret_flag(arg, flags, own=own):  # (the flag too: `--api-key --api-key`)
            flag, sep, _ = arg.partition("=")
            out.append(redact_text(f"{flag}=") + REDACTED if sep else redact_text(arg))
            hide_next = not sep
        else:
            out.append(redact_text(arg))
    return out


Value = TypeVar("Value")


def redact_env(env: Mapping[str, Value]) -> dict[str, Value | str]:
    """An environment with the values of secret names and secret-looking values replaced,
    and every secret in the rest (names kept, unless one holds a secret itself)."""
    register(in_env(env))
    return {redact_text(str(name)): (
        REDACTED if is_secret_name(str(name)) or (isinstance(value, str) and looks_secret(value))
        else redact_text(value) if isinstance(value, str) else value)
        for name, value in env.items()}


def redact_document(document: Value, flags: Iterable[str] | None = None) -> Value:
    """A suite document (or its model dump, or any JSON-like value) as it may be shown or
    recorded: its engine's secret env and flag values replaced (the flags of its
    `engine.kind` unless given), each such value anywhere else too, and every secret in
    its other strings. The document itself is not changed."""
    register(in_document(document, flags))

    def walk(value: object) -> object:
        if isinstance(value, Mapping):
            return {redact_text(key) if isinstance(key, str) else key: walk(item)
                    for key, item in value.items()}
        if isinstance(value, list | tuple):
            return [walk(item) for item in value]
        return redact_text(value) if isinstance(value, str) else value

    shown = walk(document)
    engine = shown.get("engine") if isinstance(shown, dict) else None
    if isinstance(engine, dict):
        if flags is None:
            kind = engine.get("kind")
            flags = secret_flags(kind if isinstance(kind, str) else None)
        if isinstance(engine.get("env"), dict):
            engine["env"] = redact_env(engine["env"])
        if isinstance(engine.get("extra_args"), list):
            engine["extra_args"] = redact_argv(engine["extra_args"], flags)
    return shown  # type: ignore[return-value]


def shown(text: object) -> str:
    """What may be printed of a text: redacted, and its control characters escaped (an
    escape is read again: it may spell a registered value)."""
    return redact_text(escape(redact_text(str(text))))


def plain(text: object) -> str:
    """One line of a log as a progress line shows it: redacted, without styling or
    control characters."""
    return redact_text(strip(redact_text(str(text))))
