"""A workload file or chat template config nested past what the JSON decoder follows is
bad input naming the file and line, never a RecursionError."""

from __future__ import annotations

import pytest

from harness.errors import BadInput
from harness.workloads.chat import _template_from
from harness.workloads.data import read_lines

DEEP = "[" * 100_000 + "]" * 100_000


def test_a_row_nested_past_parsing_names_its_line() -> None:
    raw = ('{"question": "1 + 1?", "answer": "2"}\n' + DEEP + "\n").encode()
    with pytest.raises(BadInput, match=r"rows\.jsonl:2: not a gsm8k row \(nested too deep"):
        read_lines(raw, "rows.jsonl", "gsm8k")


def test_a_tokenizer_config_nested_past_parsing_has_no_template() -> None:
    assert _template_from("tokenizer_config.json", DEEP) is None
