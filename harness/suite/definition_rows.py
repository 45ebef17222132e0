"""Whether a suite's runs can compute the definition it declares, from the rows they will
record (`harness validate`; docs/references.md, "Definitions").

Every definition is a ratio over request rows (`harness.metrics.stats.numerator`), and each
reads its own counts of a row (`NEEDS`). What a row holds is what the engine's answer to one
request carries, which depends on the engine and on the route the workload's protocol
sends it to (`ANSWERS`, read from each adapter's parser). A definition whose counts the
answers lack is refused at validation, naming the field, rather than found missing after
the run has spent its requests.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# The request-row counts each definition reads (harness.metrics.stats.numerator): a figure
# with the bonus token (server_avg, per_request_mean) needs the accepted drafts of each
# request; the token-based ones its completion tokens; all its verify steps.
NEEDS: dict[str, tuple[str, ...]] = {
    "server_avg": ("verify_steps", "correct_drafts"),
    "per_request": ("completion_tokens", "verify_steps"),
    "per_request_mean": ("verify_steps", "correct_drafts"),
    "spec_accept_length_mean": ("completion_tokens", "verify_steps"),
}
ALL_COUNTS = frozenset({"completion_tokens", "verify_steps", "correct_drafts"})


@dataclass(frozen=True)
class Answers:
    """What an engine's answer to one request carries on one route."""

    counts: frozenset[str]  # the row counts read from it
    source: str  # where the adapter reads them
    since: tuple[int, ...] | None = None  # the first release that sends them (None: every)


# (engine.kind, workload protocol) -> what its answers carry.
ANSWERS: dict[tuple[str, str], Answers] = {
    ("sglang", "completion"): Answers(
        ALL_COUNTS, "/generate meta_info: completion_tokens, spec_verify_ct, "
                    "spec_num_correct_drafts (harness.engines.sglang.api.parse_generate)"),
    ("sglang", "chat"): Answers(
        ALL_COUNTS, "/v1/chat/completions meta_info, sent with \"return_meta_info\": true "
                    "(harness.engines.sglang.api.parse_chat)", since=(0, 5, 17)),
    # the reference engine's server answers as SGLang 0.5.23 does (reference_engine/params.py)
    ("reference", "completion"): Answers(
        ALL_COUNTS, "/generate meta_info, as SGLang 0.5.23 (reference_engine/params.py)"),
    ("reference", "chat"): Answers(
        ALL_COUNTS, "/v1/chat/completions meta_info, as SGLang 0.5.23 "
                    "(reference_engine/openai_api.py)"),
    # --per-request-spec-decode-metrics, which every launch line of the harness sets
    ("vllm", "completion"): Answers(
        ALL_COUNTS, "/v1/completions usage.completion_tokens and metrics.speculative_decoding "
                    "num_spec_steps, num_accepted_draft_tokens (harness.engines.vllm.api)"),
    ("vllm", "chat"): Answers(
        ALL_COUNTS, "/v1/chat/completions usage.completion_tokens and "
                    "metrics.speculative_decoding (harness.engines.vllm.api)"),
}

_RELEASE = re.compile(r"^[A-Za-z0-9_.\-]+==(\d+(?:\.\d+)*)")


def release_of(build: str) -> tuple[int, ...] | None:
    """The release a build spec pins (`sglang==0.5.16` -> (0, 5, 16)); None for any other
    spec (a git ref, a local checkout), whose release only the run knows."""
    match = _RELEASE.match(build.strip())
    return tuple(int(part) for part in match.group(1).split(".")) if match else None


def missing_counts(engine: str, protocol: str, build: str, definition: str
                   ) -> tuple[str, str] | None:
    """(what is missing, why) when rows of `engine` serving `protocol` with `build` cannot
    give `definition`; None when they can."""
    answers = ANSWERS.get((engine, protocol))
    needed = NEEDS[definition]
    if answers is None:
        return (", ".join(needed), f"the harness reads no {protocol} answers of engine "
                                   f"{engine!r}")
    lacking = [count for count in needed if count not in answers.counts]
    release = release_of(build)
    if not lacking and answers.since is not None and release is not None \
            and release < answers.since:
        since = ".".join(str(part) for part in answers.since)
        return (", ".join(needed), f"{engine} {'.'.join(map(str, release))} ({build}) sends "
                                   f"no per-request counts there; {answers.source} from "
                                   f"{since}")
    if lacking:
        return (", ".join(lacking), f"{answers.source} carries no {' or '.join(lacking)}")
    return None
