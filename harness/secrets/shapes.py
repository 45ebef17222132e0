"""What a credential looks like in text, whatever its name and its length: a URL's
password (or a user part standing alone where the scheme sends it as a credential), a query
parameter that names a credential, an `Authorization` or `Bearer` value, a private key
block, and the token formats of the common services.

The token shapes are anchored on a prefix no ordinary word, path, model id or hash has
(`ghp_`, `github_pat_`, `sk-live-`, `AKIA` and sixteen capitals or digits), so they are
masked at any length. Where a prefix is also ordinary text (`sk-learn`, `hf_transfer`), the
body must read as random: a capital or a digit, and a length a word does not reach.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from harness.secrets.registry import REDACTED

# scheme:[/]/userinfo@ ; userinfo up to the last @ before the host (a password may hold
# '@'); one slash too: a URL joined as a path (`Path("https://u:p@h")` is `https:/u:p@h`).
# Never across a quote: a JSON file's text is redacted whole, and keeps its structure.
# (Every pattern here is linear in its text: a scheme starts where a word does, and each
# look-ahead is bounded, so a long line of a server's log costs no more than its length.)
URL_USERINFO = re.compile(r"(?<![A-Za-z0-9+.-])(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*):(?P<slashes>//?)"
                          r"(?P<user>[^/?#\s:\"']*)(?::(?P<password>[^/?#\s\"']*))?@"
                          r"(?=[^/?#\s@]*(?:[/?#\s]|$))")
# Schemes whose user part is a login name, never a credential (keys authenticate).
NAME_ONLY_SCHEMES = re.compile(r"(^|\+)(ssh|sftp|scp)$", re.I)
# ?token=..., &api_key=..., ;sig=...: a query parameter whose name says it is a credential
QUERY_SECRET = re.compile(
    r"(?P<lead>[?&;](?:[A-Za-z0-9_.-]*[_.-])?)(?P<name>token|access_token|id_token|auth|"
    r"api[_-]?key|apikey|key|secret|password|passwd|pwd|sig|signature|credential|jwt|"
    r"session|code)=(?P<value>[^&#\s\"']+)", re.I)
# An Authorization header's value whatever it is; a Bearer or Basic value elsewhere when it
# reads as a credential (a digit in it, or longer than a word): not a word of prose.
AUTH_HEADER = re.compile(r"(?P<lead>\b(?:Proxy-)?Authorization[\"']?[ \t]*[:=][ \t]*[\"']?"
                         r"(?:(?:Bearer|Basic|Digest|Token)[ \t]+)?)(?P<value>[^\s\"',;]+)",
                         re.I)
AUTH_VALUE = re.compile(r"(?P<lead>\b(?:Bearer|Basic)[ \t]+)(?P<value>"
                        r"(?=[A-Za-z._~+/=-]{0,64}[0-9])[A-Za-z0-9._~+/=-]{6,}|"
                        r"[A-Za-z0-9._~+/=-]{20,})", re.I)
# A PEM or OpenSSH private key, through its END line; when cut, to the end of the text or
# of the quoted string or element it stands in (its body holds no quote and no `<`).
PRIVATE_KEY = re.compile(r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----[^\"'<]*?"
                         r"(?:-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|(?=[\"'<])|\Z)")
PRIVATE_KEY_BEGIN = re.compile(r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----")
PRIVATE_KEY_END = re.compile(r"-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----")

# a body with a capital or a digit among its first characters: not a word
_MIXED = r"(?=[a-z_-]{0,40}[A-Z0-9])"


@dataclass(frozen=True)
class TokenShape:
    service: str
    pattern: str


TOKEN_SHAPES = (
    TokenShape("OpenAI, Anthropic, OpenRouter, Stripe-style keys with a kind",
               r"\bsk-(?:live|test|proj|ant|svcacct|admin|or)-[A-Za-z0-9_-]{6,}"),
    TokenShape("OpenAI-style keys", rf"\bsk-{_MIXED}[A-Za-z0-9_-]{{16,}}"),
    TokenShape("Stripe secret and restricted keys", r"\b[sr]k_(?:live|test)_[A-Za-z0-9]{6,}"),
    TokenShape("Hugging Face tokens", r"\bhf_(?=[a-z]{0,40}[A-Z0-9])[A-Za-z0-9]{8,}"),
    TokenShape("GitHub tokens", r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{6,}"),
    TokenShape("GitHub fine-grained tokens", r"\bgithub_pat_[A-Za-z0-9_]{6,}"),
    TokenShape("GitLab tokens", r"\bglpat-[A-Za-z0-9_-]{6,}"),
    TokenShape("Slack tokens", r"\bxox[abposr]-[A-Za-z0-9-]{6,}"),
    TokenShape("AWS access key ids", r"\b(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}\b"),
    TokenShape("Google API keys", r"\bAIza[A-Za-z0-9_-]{35}"),
    TokenShape("npm tokens", r"\bnpm_[A-Za-z0-9]{36}"),
    TokenShape("PyPI tokens", r"\bpypi-AgE[A-Za-z0-9_-]{16,}"),
    TokenShape("JSON Web Tokens", r"\beyJ[A-Za-z0-9_-]{4,}\.eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*"),
)
TOKEN = re.compile("|".join(f"(?:{shape.pattern})" for shape in TOKEN_SHAPES))


def url_secret(match: re.Match[str]) -> str | None:
    """The secret part of one URL's userinfo, or None when it holds none."""
    if match.group("password") is not None:
        return match.group("password") or None
    if NAME_ONLY_SCHEMES.search(match.group("scheme")):
        return None
    return match.group("user") or None


def _url_replacement(match: re.Match[str]) -> str:
    scheme, slashes, user = match.group("scheme"), match.group("slashes"), match.group("user")
    if match.group("password") is not None:
        return f"{scheme}:{slashes}{user}:{REDACTED}@"
    if url_secret(match) is None:
        return match.group(0)
    return f"{scheme}:{slashes}{REDACTED}@"


def found_in(text: str) -> list[str]:
    """Every credential the shapes find in a text (to register)."""
    found = [s for m in URL_USERINFO.finditer(text) if (s := url_secret(m))]
    found += [m.group("value") for pattern in (QUERY_SECRET, AUTH_HEADER, AUTH_VALUE)
              for m in pattern.finditer(text)]
    found += [m.group(0) for pattern in (TOKEN, PRIVATE_KEY) for m in pattern.finditer(text)]
    return [value for value in found if value != REDACTED]


def looks_secret(value: str) -> bool:
    """A value that is a credential whatever its name (a token shape, `Bearer ...`, a
    private key)."""
    return bool(TOKEN.search(value) or AUTH_VALUE.search(value) or AUTH_HEADER.search(value)
                or PRIVATE_KEY_BEGIN.search(value))


def mask_shapes(text: str) -> str:
    """Every credential the shapes find replaced by REDACTED (names and hosts kept)."""
    text = PRIVATE_KEY.sub(REDACTED, text)
    text = URL_USERINFO.sub(_url_replacement, text)
    text = QUERY_SECRET.sub(lambda m: f"{m.group('lead')}{m.group('name')}={REDACTED}", text)
    text = AUTH_HEADER.sub(lambda m: f"{m.group('lead')}{REDACTED}", text)
    text = AUTH_VALUE.sub(lambda m: f"{m.group('lead')}{REDACTED}", text)
    return TOKEN.sub(REDACTED, text)
