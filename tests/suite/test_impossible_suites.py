"""The validator refuses what no run can meet: a floor or baseline above the most a verify
step can make, a position floor past the drafts a step accepts, a share floor above 1,
`max_tokens` past the target's context, a number that is not finite or not a 64-bit
integer, and nesting of any depth. Exit 2 naming the field, in `validate`, `show` and
`run`, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.audit.config import parse_config_text
from harness.cli import main
from harness.errors import BadInput, SuiteError
from harness.suite.model import parse_suite

REFERENCE = """\
name = "tiny"

[engine]
kind = "reference"

[speculative]
algorithm = "DFLASH"
block_size = 8

[topology]
gpus = 0

[workload]
max_tokens = 96

[floors]
accept_length = 2.0
"""


def suite_with(floors: str = "", speculative: str = 'algorithm = "DFLASH"\nblock_size = 8',
               engine: str = 'kind = "reference"', extra: str = "") -> str:
    return f"""\
name = "tiny"
{extra}
[engine]
{engine}

[speculative]
{speculative}

[topology]
gpus = 0

[floors]
{floors or "accept_length = 2.0"}
"""


def refused(text: str) -> str:
    with pytest.raises(SuiteError) as caught:
        parse_suite(text, "s.toml")
    return caught.value.message


# (speculative settings, engine, server_avg maximum): per algorithm, harness.speculation.bounds
BOUNDS = [
    ('algorithm = "DFLASH"\nblock_size = 8', 'kind = "reference"', 8),
    ('algorithm = "DFLASH"\nnum_draft_tokens = 16', 'kind = "reference"', 16),
    ('algorithm = "DFLASH"', 'kind = "reference"', 64),  # unset: the schema's largest
    ('algorithm = "EAGLE"\nnum_steps = 3\nnum_draft_tokens = 8', 'kind = "reference"', 4),
    ('algorithm = "EAGLE3"\nnum_steps = 5\nnum_draft_tokens = 4', 'kind = "reference"', 4),
    ('algorithm = "STANDALONE"\nnum_steps = 3', 'kind = "reference"', 4),
    ('algorithm = "NEXTN"\nnum_draft_tokens = 6', 'kind = "reference"', 6),
    # vLLM proposes num_steps tokens for an EAGLE-style suite, whatever num_draft_tokens says
    ('algorithm = "EAGLE"\nnum_steps = 5\nnum_draft_tokens = 4', 'kind = "vllm"', 6),
    ('algorithm = "UNO"\nnum_draft_tokens = 4', 'kind = "reference"', 5),  # 3 drafts + 2
    ('algorithm = "UNO"\nnum_steps = 3\neagle_topk = 2', 'kind = "reference"', 5),
]


@pytest.mark.parametrize(("speculative", "engine", "top"), BOUNDS)
def test_an_accept_length_floor_above_a_verify_steps_most_is_refused(
        speculative: str, engine: str, top: int) -> None:
    def text(floors: str) -> str:
        return suite_with(floors, speculative, engine)

    parse_suite(text(f"accept_length = {top}.0"), "s.toml")  # reached when all is accepted
    message = refused(text(f"accept_length = {top + 0.01}"))
    assert f"floors.accept_length: a run must reach {top + 0.01:g}" in message
    assert f"server_avg is at most {top}" in message
    assert "must exceed" in refused(text(f"accept_length = {top}.0\nstrict = true"))
    # per_request counts each request's prefill token too: one more at most
    per_request = f'metric = "per_request"\naccept_length = {top + 1}.0'
    parse_suite(text(per_request), "s.toml")
    assert "per_request adds each request's prefill token" in refused(
        text(per_request.replace(f"{top + 1}.0", f"{top + 1.01}")))


def test_the_issues_floor_of_50_on_block_size_8() -> None:
    message = refused(suite_with("accept_length = 50.0"))
    assert message.startswith("s.toml: invalid suite\n  floors.accept_length: ")
    assert "block size 8 makes at most 8 tokens" in message


def test_category_floors_baselines_and_entries_are_bounded_too() -> None:
    category = suite_with('accept_length = 2.0\n'
                          'categories = { gsm8k = { accept_length = 8.5 } }')
    assert "floors.categories.gsm8k.accept_length: a run must reach 8.5" in refused(category)
    baseline = suite_with(extra="", floors="accept_length = 2.0\n\n[[baselines]]\n"
                          'label = "x"\naccept_length = 9.5\nsource = "s"\nexternal = true')
    assert "baselines.0.accept_length: 9.5 was never measured" in refused(baseline)
    entry = suite_with(floors="accept_length = 2.0\n\n[[workloads]]\nname = \"t06\"\n"
                       "temperature = 0.6\n[workloads.floors]\naccept_length = 12.0")
    assert "workloads.t06.floors.accept_length: a run must reach 12" in refused(entry)


def test_position_and_share_floors_that_no_run_meets() -> None:
    seven = "accept_length = 2.0\npositions = [0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5]"
    parse_suite(suite_with(seven), "s.toml")  # block 8: 7 draft positions
    message = refused(suite_with(seven.replace("]", ", 0.5]")))
    assert "floors.positions: 8 position floors" in message and "at most 7 drafts" in message
    assert "floors.positions.1: 1 with positions_strict = true" in refused(
        suite_with("accept_length = 2.0\npositions = [0.5, 1.0]\npositions_strict = true"))
    assert "floors.accuracy: 1 with accuracy_strict = true" in refused(
        suite_with("accept_length = 2.0\naccuracy = 1.0\naccuracy_strict = true"))
    assert "floors.positions.0: Input should be less than or equal to 1" in refused(
        suite_with("accept_length = 2.0\npositions = [1.5]"))
    assert "floors.positions.0: Input should be greater than or equal to 0" in refused(
        suite_with("accept_length = 2.0\npositions = [-0.1]"))


@pytest.mark.parametrize(("field", "line", "table"), [
    ("engine.launch_timeout_s", "launch_timeout_s = inf", "[engine]"),
    ("workload.temperature", "temperature = nan", "[workload]"),
    ("workload.request_timeout_s", "request_timeout_s = +inf", "[workload]"),
    ("floors.accept_length", "accept_length = nan", None),
    ("topology.min_memory_gib", "min_memory_gib = inf", "[topology]"),
    ("workload.chat_template_kwargs.x", 'protocol = "chat"\nchat_template_kwargs = { x = -inf }',
     "[workload]"),
    ("gate.absolute_drop", "absolute_drop = inf", "[gate]"),
])
def test_no_number_of_a_suite_is_infinite_or_nan(field: str, line: str,
                                                 table: str | None) -> None:
    text = REFERENCE.replace("accept_length = 2.0", line) if table is None else \
        REFERENCE.replace(f"{table}\n", f"{table}\n{line}\n") if table in REFERENCE else \
        f"{REFERENCE}\n{table}\n{line}\n"
    assert f"  {field}: " in refused(text)
    assert "not a finite number" in refused(text)


def test_integers_past_64_bits_and_past_any_context() -> None:
    huge = REFERENCE.replace("max_tokens = 96", "max_tokens = 100000000000000000000000")
    assert "workload.max_tokens: an integer of 77 bits does not fit in 64" in refused(huge)
    as_float = REFERENCE.replace("max_tokens = 96", "max_tokens = 1e23")
    assert "workload.max_tokens: Input should be a valid integer" in refused(as_float)
    cap = REFERENCE.replace("max_tokens = 96", f"max_tokens = {2**24}")
    assert f"workload.max_tokens: {2**24} leaves no room for a prompt" in refused(cap)
    digits = REFERENCE.replace("max_tokens = 96", "max_tokens = " + "9" * 5000)
    assert refused(digits).startswith("s.toml: not valid TOML: ")


def _model(folder: Path, config: object) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    text = config if isinstance(config, str) else json.dumps(config)
    (folder / "config.json").write_text(text)
    return folder


def _sglang(target: Path, max_tokens: int) -> str:
    """REFERENCE as an sglang suite "local" of the local `target` (a hub draft), asking for
    `max_tokens`."""
    return (REFERENCE.replace('name = "tiny"', 'name = "local"')
            .replace('kind = "reference"\n', f'kind = "sglang"\n[target]\nmodel = "{target}"\n'
                     '[draft]\nmodel = "org/draft"\n')
            .replace("max_tokens = 96", f"max_tokens = {max_tokens}"))


def test_max_tokens_past_a_local_targets_context(tmp_path: Path) -> None:
    plain = _model(tmp_path / "plain", {"max_position_embeddings": 2048})
    parse_suite(_sglang(plain, 2047), "s.toml")  # one prompt token fits
    message = refused(_sglang(plain, 2048))
    assert "workload.max_tokens: 2048 leaves no room for a prompt in a context of 2048" \
        in message and f"max_position_embeddings in {plain / 'config.json'}" in message
    # a multimodal config: its text config; rope scaling extends it as SGLang reads it
    multimodal = _model(tmp_path / "mm", {"max_position_embeddings": 1 << 20, "text_config": {
        "max_position_embeddings": 4096, "rope_scaling": {"rope_type": "yarn", "factor": 4}}})
    parse_suite(_sglang(multimodal, 16383), "s.toml")
    assert "text_config.max_position_embeddings x text_config.rope_scaling.factor 4" in \
        refused(_sglang(multimodal, 16384))
    llama3 = _model(tmp_path / "l3", {"max_position_embeddings": 4096,
                                       "rope_scaling": {"rope_type": "llama3", "factor": 8}})
    assert "context of 4096" in refused(_sglang(llama3, 5000))
    # a hub id cannot be read here: the cap no model reaches
    hub = _sglang(plain, 100_000).replace(f'"{plain}"', '"org/target"')
    parse_suite(hub, "s.toml")


@pytest.mark.parametrize("config", [
    "[" * 100_000 + "]" * 100_000,  # past the JSON decoder's recursion
    '{"max_position_embeddings": Infinity}',
    "{not json",
    "[1, 2]",
])
def test_a_local_targets_config_that_cannot_be_read_is_named(tmp_path: Path,
                                                             config: str) -> None:
    target = _model(tmp_path / "target", config)
    message = refused(_sglang(target, 64))
    assert f"target.model: {target / 'config.json'}: " in message


def _checkpoint(folder: Path) -> Path:
    """A folder the run's checkpoint check takes (a config with its model_type, a weights
    file whose safetensors header holds no tensor), so that the context is what fails."""
    _model(folder, {"model_type": "qwen3", "max_position_embeddings": 64})
    header = b"{}"
    (folder / "model.safetensors").write_bytes(len(header).to_bytes(8, "little") + header)
    return folder


def test_the_run_checks_a_target_given_on_the_command_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = _checkpoint(tmp_path / "target")
    draft = _checkpoint(tmp_path / "draft")
    suite = tmp_path / "local.toml"
    suite.write_text(_sglang(tmp_path / "none", 96).replace(f'"{tmp_path / "none"}"',
                                                             '"org/target"'))
    code = main(["run", str(suite), "--target-model", str(target), "--draft-model",
                 str(draft), "--engine-python", "/usr/bin/python3"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "workload.max_tokens: 96 leaves no room for a prompt in a context of 64" in err


NESTED = {
    "arrays": "x = " + "[" * 500 + "]" * 500,
    "inline tables": "x = " + "{ a = " * 500 + "1" + " }" * 500,
    "table headers": "[" + ".".join(["a"] * 500) + "]\nb = 1",
    "arrays of tables": "[[" + ".".join(["a"] * 500) + "]]\nb = 1",
}


@pytest.mark.parametrize("kind", list(NESTED))
def test_a_toml_nested_500_deep_is_refused(kind: str) -> None:
    message = refused(NESTED[kind] + "\n" + REFERENCE)
    assert "nest" in message


@pytest.mark.parametrize("command", ["validate", "show", "run"])
@pytest.mark.parametrize(("name", "text", "field"), [
    ("deep", NESTED["arrays"] + "\n" + REFERENCE, "nest too deep"),
    ("floor", suite_with("accept_length = 50.0"), "floors.accept_length"),
    ("tokens", REFERENCE.replace("max_tokens = 96", "max_tokens = 100000000000000000000000"),
     "workload.max_tokens"),
    ("timeout", REFERENCE.replace('kind = "reference"', 'kind = "reference"\n'
                                  "launch_timeout_s = inf"), "engine.launch_timeout_s"),
])
def test_every_command_that_loads_a_suite_exits_2_naming_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str, name: str,
        text: str, field: str) -> None:
    path = tmp_path / f"{name}.toml"
    path.write_text(text)
    args = [command, str(path)] + (["--dry-run"] if command == "run" else [])
    assert main(args) == 2
    captured = capsys.readouterr()
    assert field in captured.err and str(path) in captured.err
    assert "Traceback" not in captured.out + captured.err


def test_a_draft_config_nested_past_parsing_is_bad_input() -> None:
    with pytest.raises(BadInput, match="nest too deep"):
        parse_config_text("[" * 100_000 + "]" * 100_000, "draft/config.json")

