"""No secret in any record (issue 11): distinctive secrets planted in the suite's engine
environment, in secret flags of extra_args and in the environment of `harness run` itself;
a real run on the CPU reference engine (which enforces the API key: the secret must keep
working for the server); then every file under the results folder, the dry-run plan and
the captured output are searched: zero hits."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.builds import has_reference_dependencies
from tests.tiny_variants import tiny_variant

pytestmark = [pytest.mark.slow, pytest.mark.e2e]  # nox -s e2e

API_KEY = "sk-PLANTED-api-7f3c"
ADMIN_KEY = "sk-PLANTED-admin-91be"
HF_TOKEN = "hf_PLANTED_token_2d4e"
SHELL_TOKEN = "ghp_PLANTED_shell_c0de"
WANDB_KEY = "wb-PLANTED-wandb-5a5a"
DB_PASS = "pw-PLANTED-db-6b6b"
# issue 29: names and values the name rules missed, masked by value from load on
AUTHORIZATION = "PLANTED-authz-3e3e"
VLLM_KEYS = "PLANTED-vllm-keys-4f4f"
BEARER = "PLANTEDbearer5a5a"
URL_PASSWORD = "PLANTED@url-6c6c"
SECRETS = (API_KEY, ADMIN_KEY, HF_TOKEN, SHELL_TOKEN, WANDB_KEY, DB_PASS, AUTHORIZATION,
           VLLM_KEYS, BEARER, URL_PASSWORD)


def secretive_suite(folder: Path) -> Path:
    path = folder / "secretive.toml"
    path.write_text(tiny_variant("secretive", floor=1.0, questions=6, engine={
        "extra_args": ["--api-key", API_KEY, f"--admin-api-key={ADMIN_KEY}"],
        "env": {"HF_TOKEN": HF_TOKEN, "WANDB_API_KEY": WANDB_KEY, "DB_PASS": DB_PASS,
                "HARNESS_NOTE": "kept", "AUTHORIZATION": AUTHORIZATION,
                "VLLM_API_KEYS": VLLM_KEYS, "X_FORWARDED": f"Bearer {BEARER}",
                "MIRROR": f"https://me:{URL_PASSWORD}@mirror.example/x"}}))
    return path


def test_no_secret_reaches_any_file_or_output(tmp_path: Path) -> None:
    if not has_reference_dependencies(sys.executable):
        pytest.skip("this environment lacks the reference extra (pip install -e '.[reference]')")
    suite, results = secretive_suite(tmp_path), tmp_path / "results"
    env = {**os.environ, "GITHUB_TOKEN": SHELL_TOKEN}
    outputs = []
    for args in (["--dry-run"], ["--results", str(results), "--no-progress"]):
        done = subprocess.run([sys.executable, "-m", "harness", "run", str(suite), *args],
                              capture_output=True, text=True, env=env, timeout=900)
        outputs.append(done.stdout + done.stderr)
        assert done.returncode == 0, done.stdout + done.stderr  # the key worked for the server
    files = [path for path in results.rglob("*") if path.is_file()]
    names = {path.name for path in files}
    assert {"run.json", "requests.jsonl", "server.log", "accept_length.png"} <= names
    for secret in SECRETS:
        for output in outputs:
            assert secret not in output
        for path in files:
            assert secret.encode() not in path.read_bytes(), f"{secret} in {path}"
    run_json = next(results.rglob("run.json")).read_text()
    assert "<redacted>" in run_json and "HARNESS_NOTE" in run_json  # names kept, values not
