"""Known token shapes are credentials whatever their length and whatever the name they
stand under: hidden in free text, command lines, environments and documents; ordinary
text (model ids, hashes, paths, words that start like a token) is left alone."""

from __future__ import annotations

import io
import json

import pytest

from harness.secrets import (
    REDACTED,
    GuardedStream,
    looks_secret,
    redact_argv,
    redact_document,
    redact_env,
    redact_text,
)

# Synthetic values in each service's format (none is a real credential).
TOKENS = [
    "sk-live-4f9aQz81Lm02Pn",  # the case: 19 characters after `sk-`
    "sk-proj-Ab3dEf6hIj9kLm",
    "sk-ant-api03-Xy7zAb3dEf6h",
    "sk-Ab3dEf6hIj9kLm2nOp",
    "sk_live_51Hx9aBcDeFg",
    "rk_test_51Hx9aBcDeFg",
    "hf_AbCdEfGhIjKlMnOpQr",
    "hf_Ab3dEf6h",
    "ghp_Ab3dEf6hIj",
    "gho_Ab3dEf6hIj9kLm2n",
    "github_pat_11AB3dEf6h_Ij9kLm2n",
    "glpat-Ab3dEf6hIj9k",
    "xoxb-123456789012-Ab3dEf6h",
    "xoxp-1234-5678-abcdefgh",
    "AKIAIOSFODNN7EXAMPLE",
    "ASIAY34FZKBOKMUTVV7A",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2lnbmF0dXJl",
    "AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q",
    "npm_Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zAb7c",
    "pypi-AgEIcHlwaS5vcmcCJGE0ZjY3",
]  # fmt: skip
PRIVATE_KEY = ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmU\n"
               "QyNTUxOQAAACBaZ3Rlc3Q\n-----END OPENSSH PRIVATE KEY-----")
ORDINARY = [
    "Qwen/Qwen3-8B", "z-lab/Qwen3-8B-DFlash-b16", "meta-llama/Llama-3.1-8B-Instruct",
    "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "3f2a9c1e0b7d4a6f8e5c2b1a0d9e8f7c6b5a4d3e",
    "/root/.cache/huggingface/hub/models--Qwen--Qwen3-8B/snapshots/0123abcd",
    "scikit-learn", "sk-learn", "task-0001", "disk-usage", "hf_transfer", "hf_hub_download",
    "HF_HUB_OFFLINE=1", "Bearer tokens are accepted here", "max_new_tokens=512",
    "--max-total-tokens 4096", "123e4567-e89b-12d3-a456-426614174000", "sglang==0.5.23",
    "git+https://github.com/sgl-project/sglang@v0.5.23", "AKIA", "eyJ", "sk-", "hf_",
    "20250101T000000Z-abc123", "mask-token", "ghp_", "https://huggingface.co/Qwen/Qwen3-8B",
    "git+ssh://git@github.com/org/sglang", "the key is in KEYBOARD_LAYOUT",
    "pad_token=<|endoftext|>", "AKIAIOSFODNN7EXAMPLEX7",
]  # fmt: skip


@pytest.mark.parametrize("token", [*TOKENS, PRIVATE_KEY])
def test_a_token_in_free_text(token: str) -> None:
    shown = redact_text(f"value {token} end")
    assert token not in shown and shown == f"value {REDACTED} end"
    assert looks_secret(token)


@pytest.mark.parametrize("token", TOKENS)
def test_a_token_on_a_command_line_under_any_flag(token: str) -> None:
    shown = redact_argv(["serve", "--note", token, f"--label={token}", "--port", "1"])
    assert token not in " ".join(shown)
    assert shown[:2] == ["serve", "--note"] and shown[-2:] == ["--port", "1"]


@pytest.mark.parametrize("token", [*TOKENS, PRIVATE_KEY])
def test_a_token_under_an_innocent_name(token: str) -> None:
    shown = redact_env({"MY_SETTING": token, "PLAIN": "hello", "N": 3})
    assert shown == {"MY_SETTING": REDACTED, "PLAIN": "hello", "N": 3}


@pytest.mark.parametrize("token", TOKENS)
def test_a_token_anywhere_in_a_document(token: str) -> None:
    document = {"name": "s", "description": f"uses {token}",
                "engine": {"kind": "sglang", "env": {"MY_SETTING": token},
                           "extra_args": ["--chat-template", token]},
                "notes": [{"deep": [token]}]}
    shown = redact_document(document)
    assert token not in json.dumps(shown)
    assert shown["name"] == "s" and shown["engine"]["kind"] == "sglang"
    assert document["engine"]["env"]["MY_SETTING"] == token  # the input is not changed


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_text_is_kept(text: str) -> None:
    assert redact_text(text) == text
    assert not looks_secret(text)
    assert redact_env({"X": text}) == {"X": text}


def test_a_private_key_printed_line_by_line_is_hidden() -> None:
    """A stream is masked a line at a time: a key block written one line per write is
    hidden from its BEGIN line to its END line, and what follows it is printed."""
    sink = io.StringIO()
    stream = GuardedStream(sink)
    for line in ["before", *PRIVATE_KEY.splitlines(), "after"]:
        stream.write(line + "\n")
    stream.flush()
    out = sink.getvalue()
    assert "b3BlbnNzaC1rZXktdjEAAAAABG5vbmU" not in out and "QyNTUxOQ" not in out
    assert out.startswith("before\n") and out.endswith("after\n") and REDACTED in out


def test_an_unterminated_private_key_is_hidden_to_the_end() -> None:
    cut = PRIVATE_KEY.rsplit("\n", 1)[0]
    assert redact_text(f"key:\n{cut}") == f"key:\n{REDACTED}"
