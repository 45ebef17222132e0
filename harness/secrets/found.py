"""Finding the secrets of what enters the harness, to register them: a suite document (at
load), an environment, a command line, the harness's own process (at start-up), a build
spec. Each value found is registered (harness.secrets.registry) and so replaced wherever it
turns up later: a model URL joined into a path, an error line quoting it, a server log."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from harness.secrets.flags import is_secret_flag, secret_flags
from harness.secrets.names import is_secret_name
from harness.secrets.registry import register
from harness.secrets.shapes import found_in, looks_secret

MAX_DEPTH = 256  # a document nested deeper is refused by validation; read this far here


def in_env(env: Mapping[str, object]) -> list[str]:
    """The values of an environment under a secret name or looking secret, and every
    credential in the others (`DB_URL = "postgres://u:pw@db/x"`)."""
    found = [str(value) for name, value in env.items()
             if value is not None and str(value)
             and (is_secret_name(str(name)) or looks_secret(str(value)))]
    return found + [s for value in env.values() if value is not None
                    for s in found_in(str(value))]


def in_argv(argv: Sequence[object], flags: Iterable[str] | None = None, *,
            own: bool = False) -> list[str]:
    """The values of a command line's secret flags (`flags`: its engine's; None: any
    registered engine's; `own`: the harness's own line), and every credential in it."""
    args = [str(arg) for arg in argv]
    found: list[str] = []
    for i, arg in enumerate(args):
        if is_secret_flag(arg, flags, own=own):
            _, sep, value = arg.partition("=")
            if sep:
                found.append(value)
            elif i + 1 < len(args):
                found.append(args[i + 1])
        found += found_in(arg)
    return found


def in_document(document: object, flags: Iterable[str] | None = None) -> list[str]:
    """The secrets of a suite document (its `engine.env` and `engine.extra_args` with the
    flags of its `engine.kind`, and a credential in any string), read before validation:
    a document that fails to validate may still carry them."""
    found = [s for text in strings(document) for s in found_in(text)]
    engine = document.get("engine") if isinstance(document, Mapping) else None
    if not isinstance(engine, Mapping):
        return found
    if flags is None:
        kind = engine.get("kind")
        flags = secret_flags(kind if isinstance(kind, str) else None)
    env, args = engine.get("env"), engine.get("extra_args")
    if isinstance(args, str):  # a line instead of a list: read as the words it would be
        args = args.split()
    if isinstance(env, Mapping):
        found += in_env(env)
    if isinstance(args, list | tuple):
        found += in_argv(args, flags)
    return found


def strings(value: object) -> list[str]:
    """Every string of a document, keys included (iteratively: any depth reads)."""
    found: list[str] = []
    stack: list[tuple[object, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            found.append(item)
        elif depth < MAX_DEPTH and isinstance(item, Mapping):
            stack += [(part, depth + 1) for pair in item.items() for part in pair]
        elif depth < MAX_DEPTH and isinstance(item, list | tuple):
            stack += [(part, depth + 1) for part in item]
    return found


def register_document(document: object) -> None:
    """A suite document's secrets, registered at load."""
    register(in_document(document))


def register_process(environ: Mapping[str, str], argv: Sequence[str]) -> None:
    """The harness's own environment and command line (the CLI, at start-up): a variable
    counts by name or by value; a flag by its name (the harness's parser, no engine's);
    a build spec's URL credentials by shape."""
    register(in_env(environ))
    register(in_argv(argv, own=True))
