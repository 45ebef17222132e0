"""Suite loading and validation.

Shipped suites load; a bad one gives a SuiteError naming the file, the field and what is
allowed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.errors import BadInput, ExitCode, SuiteError
from harness.suite.model import (
    LoadedSuite,
    Suite,
    load_suite,
    parse_suite,
    resolve_suite_path,
    shipped_suites,
)
from harness.suite.schema import document_sha256
from tests.fixtures.suites_and_host import (
    FULL_SGLANG_SUITE,
    MINIMAL_SUITE,
    SHIPPED_SUITES,
    SUITES_DIR,
)


def test_there_are_shipped_suites() -> None:
    names = {p.stem for p in SHIPPED_SUITES}
    assert {"gemma4_dflash_31b", "qwen3_8b_dflash", "muse_glimmer_dflash_gsm8k"} <= names
    assert shipped_suites() == SHIPPED_SUITES


@pytest.mark.parametrize("path", SHIPPED_SUITES, ids=lambda p: p.stem)
def test_shipped_suite_loads(path: Path) -> None:
    loaded = load_suite(path)
    assert isinstance(loaded, LoadedSuite)
    assert loaded.suite.name == path.stem  # the file stem and the `name` agree
    assert loaded.path == path
    assert len(loaded.sha256) == 64
    assert loaded.sha256 == document_sha256(loaded.document)
    # by name too, from suites/
    assert load_suite(path.stem).suite == loaded.suite


def test_gemma_suite_fields() -> None:
    suite = load_suite("gemma4_dflash_31b").suite
    assert suite.engine.kind == "sglang"
    assert suite.speculative.draft_tokens == 16
    assert suite.topology.gpus == 2 and suite.topology.tp_size == 2
    assert suite.floors.accept_length == 5.4 and suite.floors.accuracy == 0.75
    assert suite.floors.strict is False  # SGLang asserts >= 5.4
    layers = suite.draft.expected_layers
    expected = [(True, 2048)] * 4 + [(False, None)]
    assert [(layer.causal, layer.window) for layer in layers] == expected


def test_floors_of_qwen_and_muse_follow_their_references() -> None:
    qwen = load_suite("qwen3_8b_dflash").suite
    # Qwen3-8B's own figure (z-lab/dflash #7, about 6.4), 95% of it, >=
    assert qwen.floors.reference == "zlab-dflash-7.qwen3-8b.gsm8k-en"
    assert qwen.floors.accept_length == 6.08 and qwen.floors.strict is False
    assert qwen.floors.metric == "spec_accept_length_mean"
    muse = load_suite("muse_glimmer_dflash_gsm8k").suite
    assert muse.floors.strict is True and muse.floors.accept_length == 2.5
    sgl_eval = next(e for e in muse.workloads if e.name == "sgl_eval")
    assert sgl_eval.floors.strict is True and sgl_eval.floors.accept_length == 2.5  # SGLang: >
    assert sgl_eval.protocol == "chat" and sgl_eval.reproduces is not None
    assert muse.speculative.block_size == 5 and muse.speculative.draft_tokens == 5


def test_sha_is_stable_across_comments_and_whitespace() -> None:
    _, doc_a = parse_suite(MINIMAL_SUITE, "a.toml")
    _, doc_b = parse_suite("# comment\n\n" + MINIMAL_SUITE.replace(" = ", "   =   "), "b.toml")
    assert document_sha256(doc_a) == document_sha256(doc_b)
    _, doc_c = parse_suite(MINIMAL_SUITE.replace("2.0", "2.5"), "c.toml")
    assert document_sha256(doc_a) != document_sha256(doc_c)


def test_minimal_and_full_suites_validate() -> None:
    suite, _ = parse_suite(MINIMAL_SUITE, "m.toml")
    assert isinstance(suite, Suite)
    assert suite.workload.questions == 200 and suite.workload.shots == 5  # defaults
    full, _ = parse_suite(FULL_SGLANG_SUITE, "f.toml")
    assert full.speculative.draft_tokens == 16


def _error(text: str, source: str = "suites/bad.toml") -> str:
    with pytest.raises(SuiteError) as caught:
        parse_suite(text, source)
    message = caught.value.message
    assert message.startswith(f"{source}:")  # every message names the file
    assert "Traceback" not in message
    return message


def _replace(text: str, old: str, new: str) -> str:
    assert old in text, old
    return text.replace(old, new, 1)


def test_suite_error_is_bad_input() -> None:
    assert issubclass(SuiteError, BadInput)
    assert SuiteError("x").exit_code == ExitCode.BAD_INPUT == 2


@pytest.mark.parametrize(
    ("section_line", "field_path"),
    [
        ('name = "tiny"\n', "name"),
        ("[topology]\ngpus = 0\n", "topology"),
        ("[floors]\naccept_length = 2.0\n", "floors"),
        ("gpus = 0\n", "topology.gpus"),
        ("accept_length = 2.0\n", "floors.accept_length"),
    ],
)
def test_missing_required_field(section_line: str, field_path: str) -> None:
    message = _error(_replace(MINIMAL_SUITE, section_line, ""))
    assert f"  {field_path}: required field is missing" in message


def test_sglang_suite_needs_target_and_draft() -> None:
    text = _replace(FULL_SGLANG_SUITE, '[target]\nmodel = "org/target"\nrevision = "main"\n', "")
    message = _error(text)
    assert "[target] and [draft]" in message


def test_sglang_model_must_not_be_empty() -> None:
    message = _error(_replace(FULL_SGLANG_SUITE, 'model = "org/target"', 'model = ""'))
    assert "target.model:" in message


@pytest.mark.parametrize(
    ("old", "new", "field_path", "hint"),
    [
        ("gpus = 2", 'gpus = "two"', "topology.gpus", "valid integer"),
        ("gpus = 2", "gpus = 2.5", "topology.gpus", "integer"),
        ("accept_length = 5.4", "accept_length = [5.4]", "floors.accept_length", "valid number"),
        ('extra_args = ["--trust-remote-code"]', 'extra_args = "--trust-remote-code"',
         "engine.extra_args", "valid list"),
        ('env = { SGLANG_FOO = "1" }', "env = { SGLANG_FOO = 1 }", "engine.env.SGLANG_FOO",
         "valid string"),
        ("questions = 200", "questions = 0", "workload.questions", "greater than or equal to 1"),
        ("questions = 200", "questions = 1320", "workload.questions", "less than or equal to 1319"),
        ("top_p = 1.0", "top_p = 0.0", "workload.top_p", "greater than 0"),
        ("accuracy = 0.75", "accuracy = 75", "floors.accuracy", "less than or equal to 1"),
        ("accept_length = 5.4", "accept_length = 0.5", "floors.accept_length",
         "greater than or equal to 1"),
        ("{ causal = false }", "{ causal = false, window = 0 }",
         "draft.expected_layers.1.window", "greater than 0"),
        ('name = "full_sglang"', 'name = "Has Spaces"', "name", "pattern"),
    ],
)
def test_wrong_type_or_value_names_the_field(
    old: str, new: str, field_path: str, hint: str
) -> None:
    message = _error(_replace(FULL_SGLANG_SUITE, old, new))
    lines = [ln for ln in message.splitlines() if ln.strip().startswith(f"{field_path}:")]
    line = lines[0] if lines else None
    assert line is not None, message
    assert hint in line, message


# The field each mistake is named by: its line in FULL_SGLANG_SUITE, that line with the
# mistake, and whether the mistake is a typo (an unknown field, its spelling to check).
# Else a coercible type: TOML has types, so a quoted number or a word for a bool is a
# mistake in the suite and must not be silently coerced (pydantic's lax mode would accept
# all of these).
MISTAKES = {
    "topology.gpus": ("gpus = 2", 'gpus = "2"', False),
    "floors.accept_length": ("accept_length = 5.4", 'accept_length = "5.4"', False),
    "nightly": ("nightly = false", 'nightly = "yes"', False),
    "floors.strict": ("strict = false", "strict = 0", False),
    "workload.seed": ("seed = 0", "seed = true", False),
    "topology.gpu": ("gpus = 2", "gpus = 2\ngpu = 2", True),
    "floors.accept_lenght": ("accept_length = 5.4", "accept_lenght = 5.4", True),
    "nigthly": ('name = "full_sglang"', 'name = "full_sglang"\nnigthly = true', True),
    "engine.extra_arg": ("kind = \"sglang\"", "kind = \"sglang\"\nextra_arg = []", True),
    "workload.shot": ("seed = 0", "seed = 0\nshot = 5", True),
    "speculative.block_sise": ("num_draft_tokens = 16", "num_draft_tokens = 16\nblock_sise = 16",
                               True),
}


@pytest.mark.parametrize("field_path", [field for field, case in MISTAKES.items() if not case[2]])
def test_coercible_wrong_types_are_rejected(field_path: str) -> None:
    old, new, _ = MISTAKES[field_path]
    assert f"  {field_path}:" in _error(_replace(FULL_SGLANG_SUITE, old, new))


@pytest.mark.parametrize("field_path", [field for field, case in MISTAKES.items() if case[2]])
def test_unknown_field_is_a_typo(field_path: str) -> None:
    old, new, _ = MISTAKES[field_path]
    message = _error(_replace(FULL_SGLANG_SUITE, old, new))
    assert f"  {field_path}: unknown field" in message
    assert "check the spelling" in message


def test_unknown_section_is_rejected() -> None:
    message = _error(FULL_SGLANG_SUITE + "\n[floor]\naccept_length = 1.0\n")
    assert "  floor: unknown field" in message


def test_unknown_engine_kind_lists_the_allowed_kinds() -> None:
    message = _error(_replace(FULL_SGLANG_SUITE, 'kind = "sglang"', 'kind = "tgi"'))
    assert "engine: got 'tgi'; allowed: 'sglang', 'reference', 'vllm'" in message


def test_missing_engine_kind_lists_the_allowed_kinds() -> None:
    message = _error(_replace(MINIMAL_SUITE, 'kind = "reference"\n', ""))
    assert "engine: missing" in message and "'sglang', 'reference', 'vllm'" in message


def test_unknown_algorithm_and_policy() -> None:
    message = _error(_replace(FULL_SGLANG_SUITE, 'algorithm = "DFLASH"', 'algorithm = "dflash2"'))
    assert "speculative.algorithm: got 'dflash2'; allowed:" in message and "'DFLASH'" in message
    message = _error(MINIMAL_SUITE.replace('kind = "reference"',
                                           'kind = "reference"\nattention_policy = "causal"'))
    allowed = "allowed: 'fixed', 'legacy' or 'regressed'"
    assert f"engine.attention_policy: got 'causal'; {allowed}" in message


def test_engine_field_path_has_no_discriminator_tag() -> None:
    message = _error(_replace(FULL_SGLANG_SUITE, "launch_timeout_s = 600", "launch_timeout_s = -1"))
    assert "  engine.launch_timeout_s:" in message
    assert "engine.sglang" not in message


def test_block_size_and_num_draft_tokens_must_agree() -> None:
    message = _error(_replace(FULL_SGLANG_SUITE, "block_size = 16", "block_size = 8"))
    assert "  speculative:" in message
    assert ("block_size (8) and num_draft_tokens (16) are aliases for DFLASH and must agree"
            in message)


def test_tp_size_larger_than_gpus() -> None:
    message = _error(_replace(FULL_SGLANG_SUITE, "tp_size = 2", "tp_size = 4"))
    assert "  topology:" in message and "tp_size 4 needs at least 4 gpus" in message


def test_several_errors_are_all_reported() -> None:
    text = _replace(FULL_SGLANG_SUITE, "gpus = 2", 'gpus = "x"')
    text = _replace(text, "accept_length = 5.4", "accept_lenght = 5.4")
    message = _error(text)
    assert "topology.gpus:" in message
    assert "floors.accept_lenght: unknown field" in message
    assert "floors.accept_length: required field is missing" in message


@pytest.mark.parametrize("text", ['name = "x\n', "[engine\nkind = 1", "a = 1\na = 2\n", "= 3"])
def test_invalid_toml(text: str) -> None:
    message = _error(text)
    assert "not valid TOML" in message
    assert "line" in message  # tomllib's position


def test_load_suite_names_the_path(tmp_path: Path) -> None:
    bad = tmp_path / "broken.toml"
    bad.write_text(_replace(MINIMAL_SUITE, "gpus = 0", "gpus = -1"))
    with pytest.raises(SuiteError) as caught:
        load_suite(bad)
    assert caught.value.message.startswith(f"{bad}: invalid suite")
    assert "topology.gpus:" in caught.value.message


def test_load_suite_not_utf8(tmp_path: Path) -> None:
    bad = tmp_path / "latin.toml"
    bad.write_bytes(b'name = "caf\xe9"\n')
    with pytest.raises(SuiteError, match="cannot read suite"):
        load_suite(bad)


def test_resolve_by_name_and_unknown_name(tmp_path: Path) -> None:
    (tmp_path / "file_stem.toml").write_text(MINIMAL_SUITE)  # name = "tiny"
    assert resolve_suite_path("tiny", tmp_path) == tmp_path / "file_stem.toml"
    assert resolve_suite_path("file_stem", tmp_path) == tmp_path / "file_stem.toml"
    with pytest.raises(SuiteError) as caught:
        resolve_suite_path("nope", tmp_path)
    expected = "nope: no suite file or suite name matches; known suites: file_stem"
    assert expected in caught.value.message
    with pytest.raises(SuiteError, match="no such suite file"):
        resolve_suite_path(str(tmp_path / "missing.toml"), tmp_path)


def test_shipped_suites_dir_is_the_repo_suites() -> None:
    assert SUITES_DIR.is_dir()
    assert shipped_suites(SUITES_DIR)


def test_sequential_in_flight_is_at_most_the_concurrency() -> None:
    """workload.sequential_in_flight bounds what --sequential sends past the next look; more
    than the concurrency could never run, so it is a mistake in the suite, named."""
    suite, _ = parse_suite(_replace(FULL_SGLANG_SUITE, "concurrency = 128",
                                    "concurrency = 128\nsequential_in_flight = 16"), "s.toml")
    assert suite.workload.sequential_in_flight == 16
    assert parse_suite(FULL_SGLANG_SUITE, "s.toml")[0].workload.sequential_in_flight is None
    message = _error(_replace(FULL_SGLANG_SUITE, "concurrency = 128",
                              "concurrency = 8\nsequential_in_flight = 9"))
    assert "sequential_in_flight (9) must be at most concurrency (8)" in message
    for bad in ("0", '"16"', "16.0"):
        message = _error(_replace(FULL_SGLANG_SUITE, "concurrency = 128",
                                  f"concurrency = 128\nsequential_in_flight = {bad}"))
        assert "workload.sequential_in_flight" in message
