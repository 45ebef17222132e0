"""Names that hold a credential: an environment variable's (`HF_TOKEN`, `WANDB_API_KEY`,
`DB_PASS`, `GITHUB_PAT`; not `AUTHOR`, `KEYBOARD_LAYOUT`, `MONKEY_PATCH`, `MAX_NEW_TOKENS`,
`SSL_KEYFILE`), a setting's, or a flag's on the harness's own command line (`--api-key`)."""

from __future__ import annotations

import re

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
