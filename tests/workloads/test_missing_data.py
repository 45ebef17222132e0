"""No data anywhere (issue 20, case 9): one line that names the three ways to give it
(HARNESS_DATA_DIR with the layout it expects, ../shared/data, the hub); a hint when the
variable points at the gsm8k folder itself; no network is said at once, not after
`datasets`' five retries."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

import harness.workloads.data as data
from harness.errors import BadInput
from harness.workloads.gsm8k import load_gsm8k


def _message() -> str:
    with pytest.raises(BadInput) as caught:
        load_gsm8k()
    return caught.value.message


def test_the_message_names_every_way(hub_only: Path, monkeypatch: pytest.MonkeyPatch,
                                     tmp_path: Path) -> None:
    monkeypatch.setenv("HARNESS_HF_MIRROR", str(tmp_path / "empty"))
    message = _message()
    assert "\n" not in message
    assert message.startswith("cannot load hf:openai/gsm8k/main/test with `datasets`")
    assert "HARNESS_DATA_DIR" in message and "$HARNESS_DATA_DIR/gsm8k/test.jsonl" in message
    assert "../shared/data/gsm8k/test.jsonl" in message and "Hugging Face hub" in message
    assert "looks like the gsm8k folder itself" not in message


def test_a_variable_pointing_at_the_gsm8k_folder_gets_a_hint(
    hub_only: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("HARNESS_HF_MIRROR", str(tmp_path / "empty"))
    folder = tmp_path / "data" / "gsm8k"
    folder.mkdir(parents=True)
    (folder / "test.jsonl").write_text('{"question": "q", "answer": "#### 1"}\n')
    monkeypatch.setenv("HARNESS_DATA_DIR", str(folder))
    message = _message()
    assert f"HARNESS_DATA_DIR={folder} looks like the gsm8k folder itself" in message
    assert f"point it at the folder above it ({folder.parent})" in message
    monkeypatch.setenv("HARNESS_DATA_DIR", str(folder.parent))  # as the hint says
    assert load_gsm8k().source == str(folder / "test.jsonl")


def test_no_network_fails_fast(hub_only: Path, monkeypatch: pytest.MonkeyPatch,
                               tmp_path: Path) -> None:
    """Without the offline variables and with no hub in reach, `datasets` is asked for its
    cache only: the answer comes at once, and says why."""
    monkeypatch.setenv("HARNESS_HF_MIRROR", str(tmp_path / "empty"))
    for name in data.OFFLINE_ENVS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(data, "hub_reachable", lambda url=None: False)
    started = time.monotonic()
    message = _message()
    assert time.monotonic() - started < 30
    assert "no network: the hub is unreachable" in message
    assert all(name not in os.environ for name in data.OFFLINE_ENVS)  # left as they were


def test_the_probe_answers_quickly_for_a_closed_port() -> None:
    started = time.monotonic()
    assert not data.hub_reachable("https://127.0.0.1:9", timeout_s=1.0)
    assert time.monotonic() - started < 5
