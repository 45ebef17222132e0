"""The test session never waits on the model hub (tests/conftest.py): huggingface_hub,
which the harness imports at start-up of a run, is offline for every test and for every
process a test starts."""

from __future__ import annotations

import subprocess
import sys


def test_huggingface_hub_is_offline_in_the_tests_and_their_processes() -> None:
    from huggingface_hub import constants

    assert constants.HF_HUB_OFFLINE
    probe = "from huggingface_hub import constants; print(constants.HF_HUB_OFFLINE)"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "True"
