"""Provenance: what ran where, and nothing secret (env allow-list, argv redaction)."""

from __future__ import annotations

import json
import sys

import pytest

from harness.results.record import GPUInfo
from harness.run import provenance
from harness.run.provenance import collect, safe_env
from harness.secrets import REDACTED, redact_argv


def test_safe_env_keeps_allow_listed() -> None:
    env = {
        "CUDA_VISIBLE_DEVICES": "0,1",
        "SGLANG_ENABLE_ASYNC_ASSERT": "True",
        "NCCL_DEBUG": "INFO",
        "HARNESS_GPU_INVENTORY": "2xH100:80",
        "HF_HUB_OFFLINE": "1",
        "PATH": "/usr/bin",
        "HOME": "/root",
    }
    assert safe_env(env) == {
        "CUDA_VISIBLE_DEVICES": "0,1",
        "HARNESS_GPU_INVENTORY": "2xH100:80",
        "HF_HUB_OFFLINE": "1",
        "NCCL_DEBUG": "INFO",
        "SGLANG_ENABLE_ASYNC_ASSERT": "True",
    }


@pytest.mark.parametrize("name", [
    "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "OPENAI_API_KEY", "SGLANG_API_KEY", "CUDA_SECRET",
    "HARNESS_PASSWORD", "SGLANG_ADMIN_API_KEY", "TORCH_AUTH_HEADER", "NCCL_CREDENTIALS",
    # (HF_TOKEN_PATH is a path, not a secret: tests/secrets/test_secret_names_and_flags.py)
    "sglang_api_key",
])
def test_safe_env_drops_secrets(name: str) -> None:
    assert safe_env({name: "s3cr3t"}, extra_names=[name]) == {}


def test_safe_env_extra_names() -> None:
    env = {"MY_FLAG": "1", "OTHER": "2", "MY_TOKEN": "x"}
    assert safe_env(env, ["MY_FLAG", "MY_TOKEN"]) == {"MY_FLAG": "1"}


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["harness", "run", "s", "--api-key", "sk-123"],
         ["harness", "run", "s", "--api-key", REDACTED]),
        (["harness", "run", "--api-key=sk-123", "s"],
         ["harness", "run", f"--api-key={REDACTED}", "s"]),
        (["x", "--admin-api-key", "a", "--hf-token=b", "--port", "1"],
         ["x", "--admin-api-key", REDACTED, f"--hf-token={REDACTED}", "--port", "1"]),
        (["x", "--api-key"], ["x", "--api-key"]),  # nothing to hide
        (["x", "--api-keys", "y"], ["x", "--api-keys", "y"]),  # another flag
    ],
)
def test_redact_argv(argv: list[str], expected: list[str]) -> None:
    assert redact_argv(argv) == expected


def test_the_harness_s_own_line_is_read_by_the_name_rule() -> None:
    """The harness's argv (provenance.argv): a flag named like a credential hides its
    value (`--token`, the hub CLI's, is no engine's); `--a` is the harness's own flag."""
    argv = ["harness", "ab", "s", "--token", "c", "--api-key=sk-1", "--a", "sglang==0.5.23"]
    assert redact_argv(argv, own=True) == ["harness", "ab", "s", "--token", REDACTED,
                                           f"--api-key={REDACTED}", "--a", "sglang==0.5.23"]


def test_redact_argv_hides_credentials_in_urls() -> None:
    # pip installs a private fork from `git+https://USER:TOKEN@host/...`; given to
    # `--sglang`, the token must not reach run.json.
    argv = ["harness", "run", "gemma4_dflash_31b", "--sglang",
            "git+https://oauth2:ghp_s3cr3tT0ken@github.com/org/sglang@abc#subdirectory=python"]
    assert "ghp_s3cr3tT0ken" not in json.dumps(redact_argv(argv))


def test_collect_has_no_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    secrets = {
        "HF_TOKEN": "hf_aaaaSECRET1",
        "OPENAI_API_KEY": "sk-SECRET2",
        "SGLANG_API_KEY": "SECRET3value",
        "CUDA_SECRET_THING": "SECRET4value",
        "HARNESS_PASSWORD": "SECRET5value",
    }
    for name, value in secrets.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("SGLANG_LOG_LEVEL", "debug")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    monkeypatch.delenv("HARNESS_GPU_INVENTORY", raising=False)
    monkeypatch.setattr(sys, "argv", ["harness", "run", "s", "--api-key", "SECRET6value",
                                      "--hf-token=SECRET7value"])
    monkeypatch.setattr(provenance, "driver_version", lambda: None)
    server_env = {"SGLANG_ENABLE_ASYNC_ASSERT": "True", "HF_TOKEN": "hf_serverSECRET8",
                  "MY_API_KEY": "SECRET9value"}
    record = collect(None, [GPUInfo(index=0, name="H100", memory_gib=80)], server_env,
                     "/data/test.jsonl", "ab" * 32, 0)
    text = json.dumps(record.model_dump(mode="json"))
    for value in [*secrets.values(), "SECRET6value", "SECRET7value", "hf_serverSECRET8",
                  "SECRET9value"]:
        assert value not in text
    assert record.env["SGLANG_LOG_LEVEL"] == "debug"
    assert record.env["CUDA_VISIBLE_DEVICES"] == "0,1"
    assert record.env["SGLANG_ENABLE_ASYNC_ASSERT"] == "True"
    assert record.argv == ["harness", "run", "s", "--api-key", REDACTED, f"--hf-token={REDACTED}"]
    assert record.seed == 0 and record.data_sha256 == "ab" * 32
    assert [g.name for g in record.gpus] == ["H100"]
    assert record.python == sys.version.split()[0]
