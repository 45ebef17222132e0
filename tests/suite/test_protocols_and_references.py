"""Suites held to the protocols they reproduce and the references they cite
(harness.suite.protocol_checks, harness/suite/protocols.toml and references.toml)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from harness.errors import BadInput, SuiteError
from harness.files import SUITES_DIR
from harness.suite import references as tables
from harness.suite.model import load_suite, parse_suite
from tests.suite.validate_cli import refused_by_validate

VLLM = (SUITES_DIR / "qwen3_8b_dflash_vllm.toml").read_text()


def _error(text: str) -> str:
    with pytest.raises(SuiteError) as caught:
        parse_suite(text, "suites/bad.toml")
    return caught.value.message


def test_the_tables_hold_together() -> None:
    references, protocols = tables.references(), tables.protocols()
    assert {r.protocol for r in references.values()} <= set(protocols)
    for protocol in protocols.values():
        assert 0 < protocol.floor_rule.fraction <= 1
        for data in protocol.datasets:
            assert data.reference is None or data.reference in references
    # the vLLM test's GSM8K reference is the paper's figure x 0.975, as the test writes it
    gsm8k = references["vllm-test.dflash-reference.qwen3-8b.gsm8k"]
    assert gsm8k.value == pytest.approx(references[gsm8k.derived_from or ""].value * 0.975)


def test_the_vllm_suite_runs_vllms_two_protocols() -> None:
    suite = load_suite("qwen3_8b_dflash_vllm").suite
    assert suite.workload.reproduces is not None
    assert suite.workload.reproduces.protocol == "vllm.dflash.correctness"
    assert (suite.workload.questions, suite.workload.shots_from) == (1319, "train")
    assert suite.floors.metric == "server_avg" and suite.floors.accept_length == 3.5
    entries = {e.name: e for e in suite.workloads}
    assert set(entries) == {"gsm8k", "mt-bench", "humaneval"}
    for entry in entries.values():
        assert entry.concurrency == 1 and entry.protocol == "chat"  # one prompt at a time
        assert entry.chat_template_kwargs == {"enable_thinking": False}
        assert entry.floors.metric == "per_request_mean"
        cited = tables.references()[entry.floors.reference or ""]
        assert entry.floors.accept_length == pytest.approx(0.95 * cited.value)


@pytest.mark.parametrize(("old", "new", "field", "other"), [
    ("concurrency = 1\n", "concurrency = 4\n", "workloads.gsm8k.concurrency", "fixes 1"),
    ("accept_length = 6.057675", "accept_length = 5.0", "workloads.gsm8k.floors.accept_length",
     "0.95 x 6.3765"),
    ('reference = "vllm-test.dflash-reference.qwen3-8b.mt-bench"\naccept',
     'reference = "nope"\naccept', "workloads.mt-bench.floors.reference", "no reference 'nope'"),
    ('dataset = "humaneval" }', 'dataset = "mbpp" }', "workloads.humaneval.reproduces.dataset",
     "has no data set 'mbpp'"),
    ('protocol = "vllm.dflash.correctness"', 'protocol = "vllm.nope"',
     "workload.reproduces.protocol", "no protocol 'vllm.nope'"),
    ('reference = "vllm-test.dflash-correctness.qwen3-8b"',
     'reference = "zlab-dflash-7.qwen3-8b.gsm8k-en"', "floors.reference",
     "measured in protocol 'dflash.benchmark.sglang'; this entry reproduces "
     "'vllm.dflash.correctness'"),
    ('model = "Qwen/Qwen3-8B"', 'model = "Qwen/Qwen3-4B"', "floors.reference",
     "this suite's target is 'Qwen/Qwen3-4B'"),
    ('reproduces = { protocol = "vllm.dflash.correctness", dataset = "gsm8k" }\n', "",
     "floors.reference", "this entry reproduces no protocol"),
    ('metric = "server_avg"\nreference = "vllm-test.dflash-correctness.qwen3-8b"',
     'metric = "per_request_mean"\nreference = "vllm-test.dflash-correctness.qwen3-8b"',
     "floors.metric", "'per_request_mean', but protocol 'vllm.dflash.correctness' gates on "
                      "'server_avg'"),
])
def test_a_departure_names_the_field_and_both_sides(old: str, new: str, field: str,
                                                    other: str) -> None:
    assert old in VLLM
    message = _error(VLLM.replace(old, new, 1))
    assert f"{field}:" in message and other in message


def test_validate_exits_2_naming_both_sides(tmp_path: Path) -> None:
    bad = tmp_path / "qwen3_8b_dflash_vllm.toml"
    bad.write_text(VLLM.replace('reference = "vllm-test.dflash-correctness.qwen3-8b"',
                                'reference = "sglang-test.dflash-gate.llama-3.1-8b"', 1))
    assert "floors.reference: 'sglang-test.dflash-gate.llama-3.1-8b' is of the pair " \
           "meta-llama/Llama-3.1-8B-Instruct" in refused_by_validate(bad)


PROTOCOL = '''
[[protocols]]
id = "p"
title = "t"
engine = "vllm"
source = "s"
definition = "per_request_mean"
floor_rule = { fraction = 0.95 }
pinned = "cited"

[[protocols.datasets]]
name = "gsm8k"
source_data = "d"
fixed = { kind = "gsm8k" }
'''


@pytest.mark.parametrize(("old", "new", "named"), [
    ("fraction = 0.95", "fraction = 1.5", "floor_rule.fraction: 1.5 is above 100%"),
    ('[[protocols.datasets]]\nname = "gsm8k"\nsource_data = "d"\nfixed = { kind = "gsm8k" }',
     "", "protocols.0.datasets: Field required"),
    ('definition = "per_request_mean"', 'definition = "per_prompt_median"',
     "protocols.0: definition 'per_prompt_median' is none the harness computes"),
    ('fixed = { kind = "gsm8k" }', 'reference = "nope"\nfixed = { kind = "gsm8k" }',
     "protocols.0.datasets.0.reference: no reference 'nope'"),
])
def test_a_bad_protocol_table_names_the_field(tmp_path: Path, old: str, new: str,
                                              named: str) -> None:
    path = tmp_path / "protocols.toml"
    path.write_text(PROTOCOL.replace(old, new))
    with pytest.raises(BadInput) as caught:
        tables.protocols(path)
    assert str(path) in str(caught.value) and named in str(caught.value)


def test_references_command_lists_the_table_and_refuses_an_unknown_id() -> None:
    listed = subprocess.run([sys.executable, "-m", "harness", "references"],
                            capture_output=True, text=True, timeout=120)
    assert listed.returncode == 0
    for reference in tables.references().values():
        assert f"{reference.id}: " in listed.stdout
    assert "pair       Qwen/Qwen3-8B + z-lab/Qwen3-8B-DFlash-b16" in listed.stdout
    unknown = subprocess.run([sys.executable, "-m", "harness", "references", "--protocols",
                              "nope"], capture_output=True, text=True, timeout=120)
    assert unknown.returncode == 2 and "no protocol 'nope'" in unknown.stderr


def test_a_baseline_of_another_protocol_says_so_and_is_drawn_apart() -> None:
    from harness.analysis.plots import suite_baselines
    from harness.suite.series import suite_entries

    loaded = load_suite("qwen3_8b_dflash")
    run_eval = next(e for e in suite_entries(loaded) if e.name == "run_eval")
    [figure] = suite_baselines(run_eval.series, run_eval.loaded.document, 2, None)
    assert figure.protocol == "vllm.dflash.correctness"
    assert figure.shown_label.endswith("[other protocol: vllm.dflash.correctness, not gated]")
    text = (SUITES_DIR / "qwen3_8b_dflash.toml").read_text()
    undeclared = text.replace('protocol = "vllm.dflash.correctness"\n', "", 1)
    message = _error(undeclared)
    assert "workloads.run_eval.baselines.0.reference:" in message
    assert "a baseline of another protocol says so with protocol = " \
           "'vllm.dflash.correctness'" in message
    own = text.replace('protocol = "vllm.dflash.correctness"\n',
                       'protocol = "dflash.benchmark.sglang"\n', 1)
    assert "measured in protocol 'vllm.dflash.correctness'" in _error(own)


# The bad input, each at `harness validate`: exit 2, the file and the field named.
SUITE_BAD_INPUT = [
    # a protocol's data set that does not exist
    ('dataset = "humaneval" }', 'dataset = "mbpp" }', "workloads.humaneval.reproduces.dataset",
     "protocol 'vllm.dflash.reference_acceptance' has no data set 'mbpp'"),
    # a reference id that does not exist, cited by a floor and by a baseline
    ('reference = "vllm-test.dflash-reference.qwen3-8b.mt-bench"\naccept',
     'reference = "nope"\naccept', "workloads.mt-bench.floors.reference",
     "no reference 'nope'"),
    ('reference = "vllm-test.dflash-reference.qwen3-8b.gsm8k"\naccept_length = 6.3765',
     'reference = "nope"\naccept_length = 6.3765', "workloads.gsm8k.baselines.0.reference",
     "no reference 'nope'"),
    # a floor above the rule's share of the reference (the rule is 95%)
    ("accept_length = 6.175", "accept_length = 6.5", "workloads.humaneval.floors.accept_length",
     "sets accept length >= 95% of the reference"),
]
PROTOCOL_TABLE_BAD_INPUT = [
    ("fraction = 0.95", "fraction = 1.05", "protocols.0.floor_rule.fraction",
     "1.05 is above 100% of the reference"),
    ('[[protocols.datasets]]\nname = "gsm8k"\nsource_data = "d"\nfixed = { kind = "gsm8k" }',
     "", "protocols.0.datasets", "Field required"),
    ('definition = "per_request_mean"', 'definition = "per_prompt_median"', "protocols.0",
     "definition 'per_prompt_median' is none the harness computes"),
    ('fixed = { kind = "gsm8k" }', 'reference = "nope"\nfixed = { kind = "gsm8k" }',
     "protocols.0.datasets.0.reference", "no reference 'nope'"),
]


def _validate(path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    from harness.cli import main

    code = main(["validate", str(path)])
    out = capsys.readouterr()
    return code, out.out + out.err


@pytest.mark.parametrize(("old", "new", "field", "other"), SUITE_BAD_INPUT)
def test_bad_suite_input_exits_2_at_validate(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                             old: str, new: str, field: str,
                                             other: str) -> None:
    assert old in VLLM
    path = tmp_path / "qwen3_8b_dflash_vllm.toml"
    path.write_text(VLLM.replace(old, new, 1))
    code, text = _validate(path, capsys)
    assert code == 2, text
    assert str(path) in text and f"{field}:" in text and other in text
    assert "Traceback" not in text


@pytest.mark.parametrize(("old", "new", "field", "other"), PROTOCOL_TABLE_BAD_INPUT)
def test_a_bad_protocol_table_exits_2_at_validate(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch, old: str,
                                                  new: str, field: str, other: str) -> None:
    """The protocols table a suite is held to, malformed: `harness validate` of a suite
    that reproduces a protocol refuses it naming the table's file and field."""
    from harness.suite import protocol_checks

    table = tmp_path / "protocols.toml"
    assert old in PROTOCOL
    table.write_text(PROTOCOL.replace(old, new))
    monkeypatch.setattr(protocol_checks, "protocols", lambda: tables.protocols(table))
    suite = tmp_path / "qwen3_8b_dflash_vllm.toml"
    suite.write_text(VLLM)
    code, text = _validate(suite, capsys)
    assert code == 2, text
    assert f"{table}: {field}: {other}" in text
    assert "Traceback" not in text
