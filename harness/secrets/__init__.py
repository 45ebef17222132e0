"""Secrets never reach an output: the one place where a secret is recognised, remembered and
hidden (standard library only; below every other folder, imported at CLI start-up).

- What a secret is: a value under a name that says so (`names`: `HF_TOKEN`, `DB_PASS`), a
  secret flag's value (`flags`: each engine's row of `harness/engine_kinds.py`, and the
  union covers a command line of no known engine), and a value
  of a credential's shape whatever its name and length (`shapes`: URL userinfo, `?token=`,
  `Authorization`/`Bearer` values, private keys, the token formats of common services).
- The registry of values (`registry`): every secret found where it enters (`found`: a suite
  at load, the harness's own environment and command line, a build spec) is registered,
  and replaced by value wherever it turns up later. One minimum length, stated there.
- One redactor (`redact`): `redact_text`, and `redact_argv`, `redact_env`,
  `redact_document`, which end in it. Every output calls it: the CLI's streams
  (`streams.guarded_streams`), every file the harness writes (run.json, request rows, the
  index, baselines, calibrations, server.log), `show`, the dry run, heartbeat lines, build
  and git messages, the published site.
- Control characters (`controls`): `escape` makes them visible, `strip` drops them;
  `shown` (redacted and escaped) is what a printing path uses, `plain` a progress line.
"""

from __future__ import annotations

from harness.secrets.controls import escape, strip
from harness.secrets.flags import (
    is_secret_flag,
    resolve_flag,
    secret_flags,
)
from harness.secrets.found import register_document, register_process
from harness.secrets.names import is_secret_name
from harness.secrets.redact import (
    plain,
    redact_argv,
    redact_document,
    redact_env,
    redact_text,
    shown,
)
from harness.secrets.registry import (
    MIN_SECRET_LENGTH,
    REDACTED,
    forget,
    register,
    registered,
)
from harness.secrets.shapes import found_in, looks_secret
from harness.secrets.streams import GuardedStream, guarded_streams

__all__ = [
    "MIN_SECRET_LENGTH", "REDACTED", "GuardedStream", "escape", "forget", "found_in",
    "guarded_streams", "is_secret_flag", "is_secret_name", "looks_secret", "plain",
    "redact_argv", "redact_document", "redact_env", "redact_text", "register",
    "register_document", "register_process", "registered", "resolve_flag", "secret_flags",
    "shown", "strip",
]
