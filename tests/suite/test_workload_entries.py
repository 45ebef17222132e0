"""`[[workloads]]` entries: each is its own series, record and floors; the main series'
document (and so its history) does not change when entries are added."""

from __future__ import annotations

import pytest

from harness.errors import BadInput, SuiteError
from harness.suite.model import LoadedSuite, load_suite, parse_suite, series_names, suite_entries
from harness.suite.schema import document_sha256
from tests.fixtures.suites_and_host import loaded_from_text

BASE = """\
name = "pair"
[engine]
kind = "reference"
[topology]
gpus = 0
[workload]
kind = "gsm8k"
questions = 10
[floors]
metric = "per_request"
accept_length = 2.8
strict = true
alpha = 0.01
"""
ENTRY = """
[[workloads]]
name = "t06"
kind = "gsm8k"
questions = 10
temperature = 0.6
top_p = 0.95
sampling_seed = 7
[workloads.floors]
accept_length = 2.0
[[workloads.baselines]]
label = "quoted"
accept_length = 2.1
source = "somewhere"
external = true
"""


def _loaded(text: str) -> LoadedSuite:
    return loaded_from_text(text, "pair.toml")


def test_entries_are_series_with_their_own_floors() -> None:
    loaded = _loaded(BASE + ENTRY)
    main, t06 = suite_entries(loaded)
    assert (main.series, main.name, t06.series, t06.name) == ("pair", None, "pair.t06", "t06")
    assert series_names(loaded.suite) == ["pair", "pair.t06"]
    floors = t06.loaded.suite.floors
    # metric, alpha and beta come from [floors]; the rest is the entry's own
    assert (floors.metric, floors.alpha, floors.accept_length, floors.strict) == (
        "per_request", 0.01, 2.0, False)
    assert t06.loaded.suite.workload.temperature == 0.6
    assert t06.loaded.suite.workload.seed_base == 7
    assert [b.label for b in t06.loaded.suite.baselines] == ["quoted"]
    document = t06.loaded.document  # what the entry's record keeps
    assert document["name"] == "pair.t06" and "workloads" not in document
    assert document["workload"] == {"kind": "gsm8k", "questions": 10, "temperature": 0.6,
                                    "top_p": 0.95, "sampling_seed": 7}
    assert document["floors"]["accept_length"] == 2.0
    assert document["floors"]["metric"] == "per_request"
    assert t06.loaded.sha256 == document_sha256(document)


def test_adding_an_entry_keeps_the_main_series_document() -> None:
    alone = suite_entries(_loaded(BASE))[0]
    with_entry = suite_entries(_loaded(BASE + ENTRY))[0]
    assert alone.loaded.document == with_entry.loaded.document
    assert alone.loaded.sha256 == with_entry.loaded.sha256


def test_choosing_entries() -> None:
    loaded = _loaded(BASE + ENTRY)
    assert [e.series for e in suite_entries(loaded, ["t06"])] == ["pair.t06"]
    assert [e.series for e in suite_entries(loaded, ["main"])] == ["pair"]
    with pytest.raises(BadInput, match="no workload entry nope; it has: main, t06"):
        suite_entries(loaded, ["nope"])


@pytest.mark.parametrize(("extra", "message"), [
    (ENTRY + ENTRY, "workload entry names must be unique"),
    (ENTRY.replace('name = "t06"\n', ""), "workloads.0.name: required field is missing"),
    (ENTRY.replace("[workloads.floors]\naccept_length = 2.0\n", ""),
     "workloads.0.floors: required field is missing"),
    (ENTRY.replace('name = "t06"', 'name = "T 06"'), "workloads.0.name"),
    (ENTRY.replace('label = "quoted"', 'label = "quoted"\nmetric = "server_avg"'),
     "baseline 'quoted' is in metric 'server_avg' but the floors use 'per_request'"),
])
def test_entry_errors(extra: str, message: str) -> None:
    with pytest.raises(SuiteError) as caught:
        parse_suite(BASE + extra, "pair.toml")
    assert message in caught.value.message, caught.value.message


def test_shipped_qwen3_pair_has_sglangs_sampled_gate() -> None:
    loaded = load_suite("qwen3_8b_dflash")
    main, run_eval, t06 = suite_entries(loaded)
    assert main.loaded.sha256 == document_sha256(
        {k: v for k, v in loaded.document.items() if k != "workloads"})
    workload, floors = t06.loaded.suite.workload, t06.loaded.suite.floors
    assert (workload.temperature, workload.top_p) == (0.6, 0.95)
    assert (floors.accept_length, floors.accuracy, floors.strict) == (2.0, 0.60, True)
    assert floors.metric == "server_avg"
    # the main entry: Qwen3-8B's own reference (z-lab/dflash #7), 95% of it
    assert (main.loaded.suite.floors.metric, main.loaded.suite.floors.accept_length) == (
        "spec_accept_length_mean", 6.08)
    assert run_eval.loaded.suite.workload.shots == 5


def test_any_entries_value_gives_a_suite_or_a_suite_error() -> None:
    import tomllib

    import tomli_w
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    keys = st.sampled_from(["name", "kind", "floors", "baselines", "questions",
                            "temperature", "accept_length", "metric", "categories",
                            "positions", "protocol", "turns", "x"])
    scalars = st.one_of(st.booleans(), st.integers(-5, 300), st.floats(-1, 5),
                        st.sampled_from(["t06", "gsm8k", "spec_bench", "chat", "qa", ""]))
    values = st.recursive(scalars, lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(keys, inner, max_size=4)), max_leaves=12)
    base = tomllib.loads(BASE)

    @settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(workloads=values, floors=values)
    def check(workloads: object, floors: object) -> None:
        document = {**base, "workloads": workloads}
        if isinstance(floors, dict):
            document["floors"] = {**base["floors"], **floors}
        try:
            text = tomli_w.dumps(document)
        except (TypeError, ValueError):
            return  # not representable in TOML
        try:
            parse_suite(text, "fuzz.toml")
        except SuiteError as error:
            assert error.message.startswith("fuzz.toml: ")

    check()
