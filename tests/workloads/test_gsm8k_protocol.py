"""The GSM8K workload, pinned to SGLang 0.5.23's run_eval gsm8k completion protocol.

Reference: SGLang 0.5.23, `sglang/test/simple_eval_mixed_prefix_gsm8k.py` (`GSM8KEval`):
`get_one_example` gives `Question: {question}\\nAnswer:` plus ` {answer}` for a shot;
the few-shot prefix is each shot + "\\n\\n"; the shots are test.jsonl lines 0..4 and the
evaluated questions lines 5..204; a prompt is the prefix + `Question: {q}\\nAnswer:`.
Extraction: commas removed, `re.findall(r"-?\\d+\\.?\\d*")`, last match, `ast.literal_eval`,
invalid on no match or on SyntaxError/ValueError.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from harness.errors import BadInput
from harness.suite.model import GSM8KWorkload
from harness.workloads.gsm8k import (
    STOP_STRINGS,
    build_prompts,
    extract_answer,
    extract_label,
    few_shot_prefix,
    is_correct,
    load_gsm8k,
)
from harness.workloads.items import Prompt, warmup_prompts
from tests.fixtures.suites_and_host import GSM8K_TEST as SHARED_GSM8K_TEST

# ../shared/data beside the checkout, or $HARNESS_DATA_DIR (a worktree has no ../shared).
GSM8K_TEST = (Path(os.environ["HARNESS_DATA_DIR"]) / "gsm8k" / "test.jsonl"
              if os.environ.get("HARNESS_DATA_DIR") else SHARED_GSM8K_TEST)
FIRST_PROMPT_SHA256 = "5d6b81e083f6f1bdaece2edaab62df2b5bba648bb241f18545b0f37905dbfc68"
FIRST_PROMPT_HEAD = "Question: Janet’s ducks lay 16 eggs per day. She eats three "
FIRST_PROMPT_TAIL = "y 16 glasses. How much does he need to pay for them?\nAnswer:"
TEST_JSONL_SHA256 = "3730d312f6e3440559ace48831e51066acaca737f6eabec99bccb9e4b3c39d14"
# The data hash: canonical rows ({"answer", "question"}, sorted keys, compact, one per
# line), the same whether test.jsonl or the hub's parquet served them.
TEST_ROWS_SHA256 = "32c548f08195e19e33408b844dd7be6aa4bcae457d957bc05909ff4bd4a00595"


@pytest.fixture(scope="module")
def jsonl_rows() -> list[dict[str, str]]:
    if not GSM8K_TEST.is_file():
        pytest.skip(f"GSM8K test split not at {GSM8K_TEST} (the shared data folder is absent)")
    return [json.loads(line) for line in GSM8K_TEST.read_text(encoding="utf-8").split("\n")
            if line.strip()]


@pytest.fixture(scope="module")
def prompts(jsonl_rows: list[dict[str, str]]) -> list[Prompt]:
    return build_prompts(load_gsm8k(GSM8K_TEST), GSM8KWorkload())


def _sglang_prompt(rows: list[dict[str, str]], shots: int, index: int) -> str:
    """Built the way `GSM8KEval` builds it, from the raw rows (independently of harness)."""
    def get_one_example(lines: list[dict[str, str]], i: int, include_answer: bool) -> str:
        ret = f"Question: {lines[i]['question']}\nAnswer:"
        if include_answer:
            ret += f" {lines[i]['answer']}"
        return ret

    few_shot = "".join(get_one_example(rows, i, True) + "\n\n" for i in range(shots))
    return few_shot + f"Question: {rows[index]['question']}\nAnswer:"


def test_data_file_is_the_known_test_split(jsonl_rows: list[dict[str, str]]) -> None:
    data = load_gsm8k(GSM8K_TEST)
    assert len(data.rows) == len(jsonl_rows) == 1319
    assert data.sha256 == TEST_ROWS_SHA256
    assert data.file_sha256 == TEST_JSONL_SHA256  # the file's bytes, checked too
    canonical = "".join(json.dumps(row, sort_keys=True, ensure_ascii=False,
                                   separators=(",", ":")) + "\n" for row in jsonl_rows)
    assert hashlib.sha256(canonical.encode()).hexdigest() == TEST_ROWS_SHA256
    assert data.source == str(GSM8K_TEST)
    assert [r.index for r in data.rows[:3]] == [0, 1, 2]


def test_first_prompt_is_sglangs(jsonl_rows: list[dict[str, str]], prompts: list[Prompt]) -> None:
    first = prompts[0]
    assert first.question_index == 5
    assert first.text == _sglang_prompt(jsonl_rows, 5, 5)
    assert hashlib.sha256(first.text.encode("utf-8")).hexdigest() == FIRST_PROMPT_SHA256
    assert first.text[:60] == FIRST_PROMPT_HEAD
    assert first.text[-60:] == FIRST_PROMPT_TAIL
    # shot answers are the full GSM8K answers, with calculator annotations and `#### N`
    assert "<<16-3-4=9>>9" in first.text and "\n#### 18\n\nQuestion: " in first.text
    assert first.text.count("Question: ") == 6 and first.text.count("\nAnswer:") == 6
    assert first.label == "64"


def test_prompt_range_and_count(jsonl_rows: list[dict[str, str]], prompts: list[Prompt]) -> None:
    assert len(prompts) == 200
    assert [p.question_index for p in prompts] == list(range(5, 205))
    last = prompts[-1]
    assert last.question_index == 204
    assert last.text == _sglang_prompt(jsonl_rows, 5, 204)
    prefix = few_shot_prefix(load_gsm8k(GSM8K_TEST).rows, 5)
    assert all(p.text.startswith(prefix) for p in prompts)
    # no evaluated question is a shot
    shot_questions = {row["question"] for row in jsonl_rows[:5]}
    assert not any(p.text[len(prefix):].removeprefix("Question: ").removesuffix("\nAnswer:")
                   in shot_questions for p in prompts)


def test_other_shot_counts(jsonl_rows: list[dict[str, str]]) -> None:
    data = load_gsm8k(GSM8K_TEST)
    zero = build_prompts(data, GSM8KWorkload(shots=0, questions=3))
    assert [p.question_index for p in zero] == [0, 1, 2]
    assert zero[0].text == f"Question: {jsonl_rows[0]['question']}\nAnswer:"
    eight = build_prompts(data, GSM8KWorkload(shots=8, questions=1))
    assert eight[0].question_index == 8
    assert eight[0].text == _sglang_prompt(jsonl_rows, 8, 8)
    everything = build_prompts(data, GSM8KWorkload(shots=0, questions=1319))
    assert everything[-1].question_index == 1318


def test_labels_of_first_rows(jsonl_rows: list[dict[str, str]]) -> None:
    rows = load_gsm8k(GSM8K_TEST).rows
    assert [r.label for r in rows[:8]] == ["18", "3", "70000", "540", "20", "64", "260", "160"]


def test_warmup_reuses_first_prompts(prompts: list[Prompt]) -> None:
    assert warmup_prompts(prompts, 2) == prompts[:2]
    assert warmup_prompts(prompts, 0) == []
    assert warmup_prompts(prompts[:1], 5) == prompts[:1]


def test_stop_strings() -> None:
    assert STOP_STRINGS == ("Question", "Assistant:", "<|separator|>")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The answer is 18", "18"),
        ("She makes 9 * 2 = $18 every day.\n#### 18", "18"),
        ("1,234,567 apples", "1234567"),
        ("costs $1,000.50 total", "1000.5"),
        ("It is 18.", "18.0"),
        ("007", None),  # literal_eval("007") is a SyntaxError in Python 3: invalid
        ("agent 007 has 5", "5"),  # only the last number counts
        ("The loss is -5 dollars", "-5"),
        ("from 3 to -2.5", "-2.5"),
        ("5-3", "-3"),  # SGLang's regex reads the minus as a sign
        ("no number here", None),
        ("", None),
        ("3.5.2", "2"),
        ("00", "0"),
        ("the value 10.25 then 4", "4"),
    ],
)
def test_extract_answer(text: str, expected: str | None) -> None:
    assert extract_answer(text) == expected


def test_is_correct() -> None:
    assert is_correct("18", "18")
    assert is_correct(extract_answer("so 18."), "18")  # 18.0 == 18
    assert is_correct("-3", "-3")
    assert not is_correct("17", "18")
    assert not is_correct(None, "18")
    assert not is_correct("18", "invalid")
    assert extract_label("no number") == "invalid"
    assert extract_label("blah\n#### 1,200") == "1200"


@pytest.mark.parametrize("text", ["1" * 400 + ".5", "-" + "9" * 400 + ".", "x " + "1" * 320 + ".0"])
def test_huge_numbers_never_crash_grading(text: str) -> None:
    # A float literal of 400 digits reads as inf; SGLang then compares inf == label -> wrong.
    # Grading a model's output must never raise.
    predicted = extract_answer(text)
    assert is_correct(predicted, "18") is False


def _write_jsonl(path: Path, rows: list[dict[str, str]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _rows(n: int) -> list[dict[str, str]]:
    return [{"question": f"q{i}?", "answer": f"a\n#### {i}"} for i in range(n)]


def test_bad_jsonl_line_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "test.jsonl"
    path.write_text(json.dumps(_rows(1)[0]) + "\n\n{not json}\n", encoding="utf-8")
    with pytest.raises(BadInput) as caught:
        load_gsm8k(path)
    assert caught.value.message.startswith(f"{path}:3: not a GSM8K row")


def test_jsonl_row_without_answer(tmp_path: Path) -> None:
    path = tmp_path / "test.jsonl"
    path.write_text('{"question": "q"}\n', encoding="utf-8")
    with pytest.raises(BadInput, match=r"test\.jsonl:1: not a GSM8K row"):
        load_gsm8k(path)


def test_too_few_rows(tmp_path: Path) -> None:
    data = load_gsm8k(_write_jsonl(tmp_path / "small.jsonl", _rows(10)))
    with pytest.raises(BadInput) as caught:
        build_prompts(data, GSM8KWorkload(shots=5, questions=200))
    assert "has 10 rows; the workload needs 205 (5 shots + 200 questions)" in caught.value.message
    assert len(build_prompts(data, GSM8KWorkload(shots=5, questions=5))) == 5


def test_missing_data_file(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match=r"workload\.data: no such file"):
        load_gsm8k(tmp_path / "absent.jsonl")


def test_raw_unicode_line_separators_inside_strings(tmp_path: Path) -> None:
    # JSON allows raw U+2028 / U+0085 inside strings (json.dumps(ensure_ascii=False) writes
    # them); JSONL lines end only at "\n", as SGLang's read_jsonl (`for line in f`) reads them.
    rows = [{"question": "a\u2028b", "answer": "x\x85y\n#### 1"}, *_rows(2)]
    path = tmp_path / "test.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows),
                    encoding="utf-8")
    data = load_gsm8k(path)
    assert len(data.rows) == 3
    assert data.rows[0].question == "a\u2028b"
