"""The SGLang adapter's secret flags against SGLang's own parser (`nox -s sglang_args`):
each is a flag the release defines (or one an earlier release did), every option of the
parser whose field is named like a credential is among them (or is a named count or
metric), and an abbreviation of a secret flag resolves, as argparse resolves it, to that
flag, which the harness then refuses (issue 20, case 2).

Needs sglang installed; elsewhere it skips unless HARNESS_REQUIRE_SGLANG=1.
"""

from __future__ import annotations

import argparse
import importlib
import os
from typing import Any

import pytest

from harness.engines.registry import adapter_for
from harness.secrets import is_secret_name, resolve_flag

# Options whose field names hold a credential word but are counts or metrics of tokens.
NOT_SECRETS = {"--bucket-inter-token-latency", "--prefill-delayer-token-usage-low-watermark",
               "--tbo-token-distribution-threshold"}
EARLIER_RELEASES = {"--watermark-key", "--watermark-key-b"}  # 0.5.23 takes --watermark-config


@pytest.fixture(scope="module")
def parser() -> argparse.ArgumentParser:
    try:
        server_args = importlib.import_module("sglang.srt.server_args")
    except ImportError as error:
        if os.environ.get("HARNESS_REQUIRE_SGLANG") == "1":
            raise
        pytest.skip(f"sglang.srt.server_args does not import here ({error}); "
                    "run `nox -s sglang_args`")
    parser = argparse.ArgumentParser(prog="sglang serve")
    server_args.ServerArgs.add_cli_args(parser)
    return parser


def _options(parser: argparse.ArgumentParser) -> dict[str, Any]:
    return {o: a for o, a in parser._option_string_actions.items() if o.startswith("--")}


def test_secret_flags_are_sglang_s(parser: argparse.ArgumentParser) -> None:
    secret = adapter_for("sglang").secret_flags
    options = _options(parser)
    assert secret - EARLIER_RELEASES <= set(options)
    named = {option for option, action in options.items() if is_secret_name(action.dest)}
    assert named - NOT_SECRETS <= secret, named - NOT_SECRETS - secret
    assert set(options) >= NOT_SECRETS  # still options (else drop them from the list)


def test_abbreviations_resolve_as_sglang_s_parser_does(parser: argparse.ArgumentParser) -> None:
    secret = adapter_for("sglang").secret_flags
    options = _options(parser)
    checked = 0
    for flag in secret & set(options):
        for cut in range(len(flag) - 1, 2, -1):
            abbreviation = flag[:cut]
            matches = [o for o in options if o.startswith(abbreviation)]
            if abbreviation in options or len(matches) != 1:
                continue  # argparse takes it as another option, or refuses it as ambiguous
            namespace, _ = parser.parse_known_args(["--model-path", "m", abbreviation, "PLANTED"])
            assert getattr(namespace, options[flag].dest) == "PLANTED"  # SGLang's reading
            assert flag in resolve_flag(abbreviation, secret)  # and the harness's
            checked += 1
    assert checked >= 20  # --api-k, --admin-api-ke, --ssl-keyfile-passw, ...
