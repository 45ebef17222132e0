"""Secrets never reach a log, a record, a plot or a summary.

A secret is
- the value of an environment variable whose *name* says it holds a credential
  (`is_secret_name`: `HF_TOKEN`, `WANDB_API_KEY`, `DB_PASS`, `GITHUB_PAT`; not `AUTHOR`,
  `KEYBOARD_LAYOUT`, `MONKEY_PATCH`, `MAX_NEW_TOKENS`, `SSL_KEYFILE`);
- the value of a secret flag on a command line, in every form argparse (and so every
  engine) accepts: `--api-key V`, `--api-key=V`, and any abbreviation `--api-k V` (argparse
  takes an unambiguous prefix as the flag). Each engine adapter lists its own secret flags
  (`secret_flags`); `SECRET_FLAGS` is every known engine's, for where no engine is known;
- the password of a URL (`https://user:TOKEN@host`, a password may hold '@'), or a user
  part standing alone in a URL of a scheme that sends it as a credential
  (`https://TOKEN@host`); an ssh user (`git+ssh://git@host`) is a name and stays; a query
  parameter that names a credential (`?token=V`);
- a value that is a credential whatever its name (`Bearer V`, a JWT, a hub token:
  `harness.mask.looks_secret`).

These name rules are the first net. Every value they find is also registered with
`harness.mask` (`register`), which masks it by value in every output stream and every file
the harness writes, wherever it turns up later (a model URL joined into a path, an error
line quoting it). The server still gets the real values: only what the harness writes is
redacted.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from harness import mask
from harness.mask import REDACTED, redact_url

__all__ = ["REDACTED", "SECRET_FLAGS", "document_secrets", "is_secret_flag", "is_secret_name",
           "redact_argv", "redact_document", "redact_env", "redact_text", "redact_url",
           "register_process", "resolve_flag", "secret_values"]

# Every known engine's (harness.engines.sglang.launch.SECRET_FLAGS: SGLang's --api-key,
# --admin-api-key, --ssl-keyfile-password, --watermark-config, --watermark-key[-b]; the
# hub's --hf-token / --token as vLLM and huggingface-cli take them), for a command line
# whose engine is not known. Each adapter's own list is the one used for its engine.
SECRET_FLAGS = frozenset({"--api-key", "--admin-api-key", "--ssl-keyfile-password",
                          "--watermark-config", "--watermark-key", "--watermark-key-b",
                          "--hf-token", "--token"})

# ------------------------------------------------------------------ secret names

# A name is read as words: split at anything not a letter or digit and at camelCase
# boundaries (`githubToken` -> GITHUB TOKEN), upper-cased.
_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
# Words that name a credential wherever they stand (WANDB_API_KEY, AWS_SECRET_ACCESS_KEY).
_SECRET_WORDS = frozenset({
    "TOKEN", "SECRET", "SECRETS", "PASSWORD", "PASSWORDS", "PASSWD", "PASSPHRASE", "KEY",
    "APIKEY", "APIKEYS", "AUTH", "AUTHORIZATION", "CREDENTIAL", "CREDENTIALS", "CREDS",
    "COOKIE", "COOKIES", "JWT", "BEARER",
})
# Plurals that name credentials only after a word saying whose (API_TOKENS, VLLM_API_KEYS;
# not SORT_KEYS, NUM_SPECULATIVE_TOKENS)
_PLURALS = frozenset({"TOKENS", "KEYS"})
_CREDENTIAL_OWNERS = frozenset({"API", "ACCESS", "AUTH", "SECRET", "PRIVATE", "SIGNING",
                                "BEARER", "HF", "HUB", "GITHUB", "GH", "REFRESH", "SESSION",
                                "ID", "ADMIN", "CLIENT", "SERVICE", "USER"})
# Short forms that are credentials only as the last word after another (DB_PASS,
# GITHUB_PAT, MYSQL_PWD); `PWD` alone is the shell's working directory.
_LAST_WORDS = frozenset({"PASS", "PAT", "PWD"})
# A word glued to a credential word (HFTOKEN, DBPASSWORD); KEY is not among them, since
# MONKEY and TURKEY end in it.
_SECRET_ENDINGS = ("TOKEN", "SECRET", "PASSWORD", "PASSWD", "APIKEY", "PASSPHRASE")
# After a credential word, these make the name one of a place, a kind or a count
# (SSL_KEY_FILE, HF_TOKEN_PATH, AUTH_TYPE, SPECULATIVE_TOKEN_MAP), not of a value.
_NOT_A_VALUE_AFTER = frozenset({
    "FILE", "PATH", "DIR", "FOLDER", "NAME", "TYPE", "KIND", "MODE", "MAP", "SIZE", "LEN",
    "LENGTH", "COUNT", "LIMIT", "FORMAT", "ALGORITHM", "ENV", "VAR",
})
# Before TOKEN, these make it a count of tokens (MAX_TOKEN, NUM_TOKEN), not a credential.
_COUNT_BEFORE_TOKEN = frozenset({"MAX", "MIN", "NUM", "TOTAL", "PER", "FIRST", "NEW"})


def name_words(name: str) -> list[str]:
    return [word.upper() for word in _WORD.findall(name)]


def is_secret_name(name: str) -> bool:
    """Whether an environment variable (or setting) of this name holds a credential."""
    words = name_words(name)
    for i, word in enumerate(words):
        after = words[i + 1] if i + 1 < len(words) else None
        before = words[i - 1] if i else None
        if after in _NOT_A_VALUE_AFTER:
            continue
        if word in _SECRET_WORDS:
            if word == "TOKEN" and before in _COUNT_BEFORE_TOKEN:
                continue
            return True
        if word in _LAST_WORDS and after is None and before is not None:
            return True
        if word in _PLURALS and before in _CREDENTIAL_OWNERS:
            return True
        if word.endswith(_SECRET_ENDINGS) and word not in _SECRET_WORDS:
            return True
    return False


# ------------------------------------------------------------------ URLs

# The patterns (URL userinfo, query tokens, `Bearer` values) are harness.mask's: one home
# for what a secret looks like, shared with the mask that every output passes through.


# ------------------------------------------------------------------ command lines


def _dashed(arg: str) -> str:
    """`--api_key=V` as vLLM's parser reads it: underscores in a flag's name are dashes."""
    flag, sep, value = arg.partition("=")
    return "--" + flag[2:].replace("_", "-") + sep + value if flag.startswith("--") else arg


def resolve_flag(arg: str, flags: Iterable[str]) -> tuple[str, ...]:
    """The flags of `flags` that a command-line argument may set, as argparse resolves it:
    the flag itself when listed (`--flag` or `--flag=value`), else every listed flag it
    abbreviates (argparse takes an unambiguous prefix; an ambiguous one is refused by the
    engine, and is reported here with all its candidates so that no check misses it)."""
    if not arg.startswith("--") or arg == "--":
        return ()
    flag = arg.split("=", 1)[0]
    known = frozenset(flags)
    if flag in known:
        return (flag,)
    return tuple(sorted(f for f in known if f.startswith(flag)))


def is_secret_flag(arg: str, secret_flags: Iterable[str] = SECRET_FLAGS,
                   abbreviations: bool = True) -> bool:
    """Whether `arg` sets a secret flag. `abbreviations=False` for a command line whose
    parser is not the engine's (the harness's own: its flags abbreviate to `--a`, `--b`)."""
    spellings = {arg, _dashed(arg)}  # vLLM takes --api_key and --hf_token= as its flags
    if any(s.split("=", 1)[0] in SECRET_FLAGS for s in spellings):
        return True  # any known engine's secret flag, written in full, is one everywhere
    if not abbreviations:
        return any(s.split("=", 1)[0] in frozenset(secret_flags) for s in spellings)
    return any(resolve_flag(s, secret_flags) for s in spellings)


def secret_values(env: Mapping[str, Any] = {}, argv: Sequence[Any] = (),
                  secret_flags: Iterable[str] = SECRET_FLAGS) -> tuple[str, ...]:
    """Every secret value in an environment and a command line (to redact wherever seen).
    Tolerant of a document not yet validated: non-string entries are read as text."""
    secret_flags = frozenset(secret_flags)
    found = [str(value) for name, value in env.items()
             if value is not None and str(value)
             and (is_secret_name(str(name)) or mask.looks_secret(str(value)))]
    args = [str(arg) for arg in argv]
    for i, arg in enumerate(args):
        if is_secret_flag(arg, secret_flags):
            _, sep, value = arg.partition("=")
            if sep and value:
                found.append(value)
            elif not sep and i + 1 < len(args):
                found.append(args[i + 1])
        found += mask.pattern_secrets(arg)
    found += [s for value in env.values() for s in mask.pattern_secrets(str(value))]
    mask.register(found)  # masked by value in every output from now on
    # Longest first, so a secret containing another is replaced whole; with every value
    # registered before (a server log filtered with these hides those too).
    return tuple(sorted({v for v in [*found, *mask.registered()] if len(v) >= 4},
                        key=len, reverse=True))


def redact_argv(argv: Sequence[str], secret_flags: Iterable[str] = SECRET_FLAGS,
                abbreviations: bool = True) -> list[str]:
    """A command line with secret flag values (in every form) and URL credentials replaced."""
    secret_flags = frozenset(secret_flags)
    out: list[str] = []
    hide_next = False
    for arg in argv:
        if hide_next:
            out.append(REDACTED)
            hide_next = False
            continue
        if is_secret_flag(arg, secret_flags, abbreviations):
            flag, sep, _ = arg.partition("=")
            out.append(f"{flag}={REDACTED}" if sep else arg)
            hide_next = not sep
            continue
        out.append(mask.mask(arg))
    return out


def redact_env(env: Mapping[str, Any]) -> dict[str, Any]:
    """An environment with secret-looking variables' values replaced (names kept)."""
    return {name: (REDACTED if is_secret_name(str(name))
                   or (isinstance(value, str) and mask.looks_secret(value))
                   else mask.mask(value) if isinstance(value, str) else value)
            for name, value in env.items()}


def redact_text(text: str, secrets: Iterable[str]) -> str:
    """Replace each known secret value anywhere in a text (a log, a title, a summary)."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, REDACTED)
    return mask.mask(text)  # every registered value, and the patterns


def document_secrets(document: Any, secret_flags: Iterable[str] = SECRET_FLAGS) -> tuple[str, ...]:
    """The secrets of a suite document (its `engine.env` and `engine.extra_args`), read
    before validation: a document that fails to validate may still carry them."""
    # any string of the document may carry one (`target.model = "https://u:pw@host/x"`)
    anywhere = [s for text in _strings(document) for s in mask.pattern_secrets(text)]
    engine = document.get("engine") if isinstance(document, Mapping) else None
    if not isinstance(engine, Mapping):
        mask.register(anywhere)
        return tuple(sorted(set(anywhere), key=len, reverse=True))
    env = engine.get("env")
    args = engine.get("extra_args")
    if isinstance(args, str):  # a line instead of a list: read as the words it would be
        args = args.split()
    found = secret_values(env if isinstance(env, Mapping) else {},
                          args if isinstance(args, list | tuple) else (), secret_flags)
    mask.register(anywhere)
    return tuple(sorted({*found, *(s for s in anywhere if len(s) >= 4)}, key=len,
                        reverse=True))


def _strings(value: Any, depth: int = 0) -> list[str]:
    if depth > 64:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, Mapping):
        return [s for key, item in value.items()
                for s in (*_strings(key, depth + 1), *_strings(item, depth + 1))]
    if isinstance(value, list | tuple):
        return [s for item in value for s in _strings(item, depth + 1)]
    return []


def register_process(environ: Mapping[str, str], argv: Sequence[str]) -> None:
    """Register the secrets of the harness's own environment and command line (the CLI
    does at start-up): its flags are the harness's, so no abbreviation is read; a
    variable counts by name or by value; a build spec's URL credentials by pattern."""
    mask.register(str(value) for name, value in environ.items()
                  if value and (is_secret_name(name) or mask.looks_secret(value)))
    for i, arg in enumerate(argv):
        mask.register(mask.pattern_secrets(arg))
        if is_secret_flag(arg, SECRET_FLAGS, abbreviations=False):
            _, sep, value = arg.partition("=")
            mask.register([value] if sep else argv[i + 1:i + 2])


def redact_document(document: Any, secret_flags: Iterable[str] = SECRET_FLAGS) -> Any:
    """A suite document (or its model dump) as it may be shown or recorded: secret env
    values and secret flag values replaced, and each such value anywhere else too."""
    hidden = document_secrets(document, secret_flags)

    def walk(value: Any) -> Any:
        if isinstance(value, Mapping):
            return {key: walk(item) for key, item in value.items()}
        if isinstance(value, list | tuple):
            return [walk(item) for item in value]
        return redact_text(value, hidden) if isinstance(value, str) else value

    shown = walk(document)
    engine = shown.get("engine") if isinstance(shown, dict) else None
    if isinstance(engine, dict):
        if isinstance(engine.get("env"), dict):
            engine["env"] = redact_env(engine["env"])
        if isinstance(engine.get("extra_args"), list):
            engine["extra_args"] = redact_argv([str(a) for a in engine["extra_args"]],
                                               secret_flags)
    return shown
