"""The engines the harness knows, as data that every folder may read: for each
`engine.kind`, the module whose `ADAPTER` serves it (imported on first use by
`harness.engines.registry`, so that `harness --help` loads none) and its secret flags.

`harness.secrets` sits below the engines and reads each engine's secret flags from here,
so no import has to hand them over and no package metadata has to name them: a library call
that never imports an engine (`load_suite` in a notebook) hides the same flags as the CLI.
Each adapter's `secret_flags` is its row; an engine added here is in the union that covers
a command line of no known engine, and there is no second list to forget it in.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class EngineKind:
    adapter_module: str  # defines ADAPTER (harness.engines.interface.EngineAdapter)
    secret_flags: frozenset[str]  # the flags of its launch line whose value is a credential


ENGINES: dict[str, EngineKind] = {
    # SGLang 0.5.23's fields/serving.py api_key, admin_api_key, ssl_keyfile_password;
    # fields/exec_.py watermark_config (a JSON file path or an inline JSON object holding
    # watermark_key and watermark_key_b, which earlier releases took as --watermark-key /
    # --watermark-key-b). tests/sglang_oracle/test_secret_flags.py checks them against
    # SGLang's own parser.
    "sglang": EngineKind("harness.engines.sglang", frozenset({
        "--api-key", "--admin-api-key", "--ssl-keyfile-password", "--watermark-config",
        "--watermark-key", "--watermark-key-b"})),
    # the reference engine's own server (reference_engine/__main__.py)
    "reference": EngineKind("harness.engines.reference_adapter",
                            frozenset({"--api-key", "--admin-api-key"})),
    # vLLM 0.32.0: entrypoints/openai/cli_args.py api_key (the Bearer token the server
    # requires), engine/arg_utils.py hf_token (a hub token, or True: read from disk)
    "vllm": EngineKind("harness.engines.vllm", frozenset({"--api-key", "--hf-token"})),
}
