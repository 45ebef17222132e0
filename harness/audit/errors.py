"""The audit's failures, each with its exit code (documented in docs/audit.md)."""

from __future__ import annotations

from harness.errors import BadInput, EngineError, ExitCode, HarnessError

# The version's own code raised on this config: SGLang would refuse to load the draft.
VERSION_REJECTS = ExitCode.VERSION_REJECTS


class ResolverError(BadInput):
    """A version's resolver could not be found or compiled (exit 2); names version and file."""


class AuditLimitError(EngineError):
    """Something the audit cannot reproduce or run (exit 3); not the version's decision."""


class VersionRejected(HarnessError):
    """The SGLang version's own code raised on the draft config (exit 5).

    `version` is the version (or commit) label, `exception` the exception type's name,
    `detail` its message, `stage` "load" (building the config) or "resolve" (the resolver).
    """

    exit_code = VERSION_REJECTS

    def __init__(self, version: str, exception: str, detail: str, stage: str,
                 where: str | None = None) -> None:
        at = f" ({where})" if where else ""
        step = "building the draft config" if stage == "load" else "resolving draft attention"
        super().__init__(f"{version} rejects this draft config while {step}{at}: "
                         f"{exception}: {detail}")
        self.version, self.exception, self.detail = version, exception, detail
        self.stage, self.where = stage, where
