"""Secrets (issue 20, cases 1-3): the name rule on a table both ways, every argparse form of
a secret flag (`--flag V`, `--flag=V`, abbreviations resolved against the engine's own flag
list), URL credentials; and every command that prints a suite: `show` (tree and JSON),
`validate` errors, the dry run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.cli import main
from harness.engines.registry import adapter_for
from harness.secrets import (
    REDACTED,
    is_secret_name,
    redact_argv,
    redact_document,
    redact_text,
    resolve_flag,
    secret_flags,
)
from harness.secrets.found import in_argv
from harness.suite.model import parse_suite
from tests.fixtures.suites_and_host import secretive_suite

SECRET_NAMES = [
    "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "WANDB_API_KEY", "OPENAI_API_KEY", "DB_PASS",
    "GITHUB_PAT", "DB_PASSWORD", "MYSQL_PWD", "AWS_SECRET_ACCESS_KEY", "AWS_ACCESS_KEY_ID",
    "HFTOKEN", "githubToken", "apiKey", "NPM_AUTH", "BASIC_AUTH", "SESSION_COOKIE",
    "GOOGLE_CREDENTIALS", "PRIVATE_KEY", "SSH_PASSPHRASE", "CLIENT_SECRET", "KEY",
    "HARNESS_PASSWORD", "SGLANG_API_KEY", "MY_APIKEY", "DBPASSWORD",
]  # fmt: skip
NOT_SECRET_NAMES = [
    "AUTHOR", "KEYBOARD_LAYOUT", "MONKEY_PATCH", "MAX_NEW_TOKENS", "TOKENIZERS_PARALLELISM",
    "SSL_KEYFILE", "SSL_KEY_FILE", "HF_TOKEN_PATH", "PWD", "OLDPWD", "PATH", "HOME",
    "BYPASS_CACHE", "PASSES", "KEY_PATH", "AUTH_TYPE", "SPECULATIVE_TOKEN_MAP", "MAX_TOKEN",
    "CUDA_VISIBLE_DEVICES", "SGLANG_LOG_LEVEL", "HARNESS_NOTE", "TURKEY", "AUTHORITY",
    "PASSIVE_MODE", "PATTERN", "KEYS_DIR",
]  # fmt: skip


@pytest.mark.parametrize("name", SECRET_NAMES)
def test_secret_names(name: str) -> None:
    assert is_secret_name(name)


@pytest.mark.parametrize("name", NOT_SECRET_NAMES)
def test_not_secret_names(name: str) -> None:
    assert not is_secret_name(name)


@pytest.mark.parametrize(("url", "shown"), [
    ("git+ssh://git@github.com/org/sglang", "git+ssh://git@github.com/org/sglang"),
    ("ssh://deploy@host/repo.git", "ssh://deploy@host/repo.git"),
    ("git+https://oauth2:ghp_tok123@github.com/x", f"git+https://oauth2:{REDACTED}@github.com/x"),
    ("https://ghp_tok123@github.com/x", f"https://{REDACTED}@github.com/x"),
    ("https://github.com/org/sglang@v0.5.22", "https://github.com/org/sglang@v0.5.22"),
    ("pip install x @ git+https://u:p4ss@h/y", f"pip install x @ git+https://u:{REDACTED}@h/y"),
])  # fmt: skip
def test_url_credentials(url: str, shown: str) -> None:
    assert redact_text(url) == shown


@pytest.mark.parametrize(("kind", "argv"), [
    *((kind, argv) for kind in ("sglang", "reference", "vllm") for argv in (
        ["--api-key", "sk-PLANT"], ["--api-key=sk-PLANT"], ["--api-k", "sk-PLANT"],
        ["--api-ke=sk-PLANT"])),
    *((kind, argv) for kind in ("sglang", "reference") for argv in (
        ["--admin-api-ke", "sk-PLANT"], ["--admin=sk-PLANT"])),
    ("vllm", ["--hf-tok", "sk-PLANT"]), ("vllm", ["--hf-token=sk-PLANT"]),
])  # fmt: skip
def test_every_argparse_form_of_a_secret_flag_is_redacted(kind: str, argv: list[str]) -> None:
    flags = adapter_for(kind).secret_flags
    shown = redact_argv(["serve", *argv, "--max-total-tokens", "4096"], flags)
    assert "sk-PLANT" not in " ".join(shown) and REDACTED in " ".join(shown)
    assert shown[-2:] == ["--max-total-tokens", "4096"]
    assert in_argv(argv, flags) == ["sk-PLANT"]


@pytest.mark.parametrize("argv", [["--ssl-keyfile-passw", "pw-PLANT"],
                                  ["--watermark-key-b=pw-PLANT"], ["--watermark-k", "pw-PLANT"]])
def test_sglang_only_secret_flags(argv: list[str]) -> None:
    assert "pw-PLANT" not in " ".join(redact_argv(argv, adapter_for("sglang").secret_flags))


def test_resolution_is_the_reserved_flag_check_s() -> None:
    """One resolution: owned flags and secret flags are found the same way."""
    from harness.engines.flags import owned_flag

    sglang = adapter_for("sglang")
    assert resolve_flag("--api-k", sglang.secret_flags) == ("--api-key",)
    assert resolve_flag("--watermark-key", sglang.secret_flags) == ("--watermark-key",)
    assert set(resolve_flag("--a=1", sglang.secret_flags)) == {"--admin-api-key", "--api-key"}
    assert resolve_flag("--api-keys", sglang.secret_flags) == ()
    assert resolve_flag("sk-value", sglang.secret_flags) == ()
    assert owned_flag("--speculative-alg=X", sglang.reserved_flags) == "--speculative-algorithm"
    assert sglang.secret_flags | adapter_for("reference").secret_flags <= secret_flags()


def test_the_harness_s_own_argv_is_not_read_as_an_engine_s() -> None:
    """`harness ab --a SPEC`: --a is the harness's flag, not an abbreviated --api-key."""
    argv = ["harness", "ab", "s", "--a", "sglang==0.5.22", "--api-key", "sk-PLANT"]
    assert redact_argv(argv, own=True) == [*argv[:-1], REDACTED]


SUITE = secretive_suite(
    '["--admin-api-key", "adm-PLANT-1", "--ssl-keyfile-password", "pw-PLANT-2",\n'
    '              "--api-key=sk-PLANT-3", "--max-total-tokens", "4096"]',
    '{ WANDB_API_KEY = "wb-PLANT-4", AUTHOR = "kept-author" }')
PLANTED = ("adm-PLANT-1", "pw-PLANT-2", "sk-PLANT-3", "wb-PLANT-4")


def _suite(tmp_path: Path, text: str = SUITE, name: str = "secretive.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize("extra", [[], ["--json"]])
def test_show_redacts_every_secret(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                   extra: list[str]) -> None:
    assert main(["show", str(_suite(tmp_path)), *extra]) == 0
    out = capsys.readouterr().out
    for planted in PLANTED:
        assert planted not in out
    assert "kept-author" in out and "4096" in out and REDACTED in out


def test_show_redacts_an_abbreviated_secret_flag(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    text = SUITE.replace('"--api-key=sk-PLANT-3"', '"--api-k", "sk-PLANT-3"')
    assert main(["show", str(_suite(tmp_path, text))]) == 0
    assert "sk-PLANT-3" not in capsys.readouterr().out


@pytest.mark.parametrize("abbreviated", ['"--api-k", "sk-PLANT-3"', '"--api-ke=sk-PLANT-3"',
                                         '"--ssl-keyfile-passw", "sk-PLANT-3"'])
def test_an_abbreviated_secret_flag_is_refused_everywhere(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], abbreviated: str
) -> None:
    path = _suite(tmp_path, SUITE.replace('"--api-key=sk-PLANT-3"', abbreviated))
    assert main(["validate", str(path)]) == 2
    assert main(["run", str(path), "--dry-run"]) == 2
    captured = capsys.readouterr()
    out = captured.out + captured.err
    assert "abbreviates the secret flag" in out and "write it in full" in out
    assert "sk-PLANT-3" not in out and "Traceback" not in out


def test_validate_errors_hide_secrets(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A rejected field is quoted in the error: a secret beside it is not."""
    text = SUITE.replace('AUTHOR = "kept-author"', 'AUTHOR = "kept-author", N = 5').replace(
        'kind = "sglang"', 'kind = "sglang"\nlaunch_timeout_s = "wb-PLANT-4"')
    assert main(["validate", str(_suite(tmp_path, text))]) == 2
    err = capsys.readouterr().err
    assert "launch_timeout_s" in err and "engine.env.N" in err
    assert "wb-PLANT-4" not in err
    line = SUITE.replace('extra_args = ["--admin-api-key", "adm-PLANT-1",',
                         'extra_args = "--admin-api-key adm-PLANT-1"\nx = [')
    assert main(["validate", str(_suite(tmp_path, line, "line.toml"))]) == 2
    assert "adm-PLANT-1" not in capsys.readouterr().err


def test_dry_run_redacts_every_form(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", str(_suite(tmp_path)), "--dry-run"]) == 0
    out = capsys.readouterr().out
    for planted in PLANTED:
        assert planted not in out
    assert "--max-total-tokens 4096" in out


def test_redact_document_hides_a_secret_repeated_elsewhere() -> None:
    suite, document = parse_suite(SUITE.replace('name = "secretive"',
                                                'name = "secretive"\ndescription = "sk-PLANT-3"'),
                                  "s.toml")
    shown = json.dumps(redact_document(document, adapter_for("sglang").secret_flags))
    for planted in PLANTED:
        assert planted not in shown
    assert "sk-PLANT-3" in suite.description


VLLM_SUITE = """
name = "secretive_vllm"
[engine]
kind = "vllm"
extra_args = ["--api-key=sk-PLANT-3", "--hf-token", "hf-PLANT-5", "--max-num-seqs", "4"]
env = { WANDB_API_KEY = "wb-PLANT-4" }
[target]
model = "org/target"
[draft]
model = "org/draft"
[speculative]
algorithm = "DFLASH"
num_draft_tokens = 8
[topology]
gpus = 1
[floors]
accept_length = 2.0
"""


def test_vllm_secrets_are_redacted_and_abbreviations_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """vLLM's own secret flags (--api-key, --hf-token), in its adapter's list."""
    path = _suite(tmp_path, VLLM_SUITE, "vllm.toml")
    for command in (["show", str(path)], ["run", str(path), "--dry-run"]):
        assert main(command) == 0, command
        out = capsys.readouterr().out
        for planted in ("sk-PLANT-3", "hf-PLANT-5", "wb-PLANT-4"):
            assert planted not in out, command
        assert "4" in out and REDACTED in out
    for abbreviated in ('"--hf-tok", "hf-PLANT-5"', '"--api_k=sk-PLANT-3"'):
        bad = _suite(tmp_path, VLLM_SUITE.replace('"--hf-token", "hf-PLANT-5"', abbreviated),
                     "bad.toml")
        assert main(["validate", str(bad)]) == 2
        captured = capsys.readouterr()
        assert "abbreviates the secret flag" in captured.err
        assert "PLANT" not in captured.out + captured.err
