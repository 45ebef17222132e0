"""vLLM's own code as the oracle (`nox -s vllm_cpu`): its argument parser on every vLLM
suite's launch line, its metrics code on synthetic counts, its DFlash layer resolver."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.engines.registry import adapter_for
from harness.engines.vllm import api
from harness.engines.vllm.audit import vllm_layers
from harness.suite.checkpoints import Models
from harness.suite.model import load_suite
from tests.vllm_oracle.vllm_code import METRICS, STOP_CHECK, parse_lines, run_vllm, vllm_python

SUITES = Path(__file__).resolve().parents[2] / "suites"
VLLM_SUITES = sorted(p for p in SUITES.glob("*.toml") if 'kind = "vllm"' in p.read_text())
DRAFT = Path(__file__).resolve().parents[2] / "reference_engine/tiny/draft"


def _suite_line(path: Path) -> list[str]:
    suite = load_suite(path).suite
    models = Models("/models/target", "/models/draft")
    return adapter_for("vllm").launch_command(suite, "python", "127.0.0.1", 31234, models)


@pytest.fixture(scope="module")
def parsed_suites() -> dict[Path, dict]:
    """Every vLLM suite's launch line as vLLM's parser reads it (one process for all)."""
    return dict(zip(VLLM_SUITES, parse_lines([_suite_line(path)[2:] for path in VLLM_SUITES]),
                    strict=True))


@pytest.mark.parametrize("path", VLLM_SUITES, ids=lambda p: p.stem)
def test_every_vllm_suites_launch_line_parses_as_the_harness_means(
        path: Path, parsed_suites: dict[Path, dict]) -> None:
    suite = load_suite(path).suite
    command = _suite_line(path)
    assert command[:2] == ["vllm", "serve"]  # the console script beside `python`
    parsed = parsed_suites[path]
    assert "error" not in parsed, parsed
    assert (parsed["subcommand"], parsed["model"]) == ("serve", "/models/target")
    assert (parsed["host"], parsed["port"]) == ("127.0.0.1", 31234)
    assert parsed["seed"] == suite.workload.seed
    assert parsed["tp"] == suite.topology.tp_size
    assert parsed["per_request"] == "detailed"
    spec = json.loads(command[command.index("--speculative-config") + 1])
    assert {k: parsed["speculative_config"][k] for k in spec} == spec


def test_a_topologys_node_lines_parse_as_the_harness_means() -> None:
    """tp, dp, pp and two nodes through vLLM's own multi-node flags, node 1 headless."""
    from harness.engines.interface import Placement
    from harness.suite.model import parse_suite

    # a CPU suite of the shipped vLLM ones (the GPU suites declare their GPUs)
    text = next(text for text in (path.read_text() for path in VLLM_SUITES)
                if "[topology]\ngpus = 0\n" in text)
    suite = parse_suite(text.replace("[topology]\ngpus = 0\n", "[topology]\ngpus = 0\n"
                                     "tp_size = 2\npp_size = 2\nnnodes = 2\n"), "t.toml")[0]
    models = Models("/models/target", "/models/draft")
    lines = [adapter_for("vllm").launch_command(suite, "python", "127.0.0.1", 31234, models,
                                                None, Placement(rank, 2, "10.0.0.1:29500"))
             for rank in (0, 1)]
    for rank, parsed in enumerate(parse_lines([line[2:] for line in lines])):
        assert "error" not in parsed, parsed
        assert (parsed["tp"], parsed["pp"], parsed["nnodes"], parsed["node_rank"]) == \
            (2, 2, 2, rank)
        assert (parsed["master_addr"], parsed["master_port"]) == ("10.0.0.1", 29500)
        assert parsed["headless"] is (rank == 1)


REFUSED_FORMS = ["--speculative_config.num_speculative_tokens", "--see",
                 "--speculative-config.method"]


@pytest.fixture(scope="module")
def parsed_forms() -> dict[str, dict]:
    """The first vLLM suite's line with each refused form added, as vLLM's parser reads it."""
    suite = load_suite(VLLM_SUITES[0]).suite
    command = adapter_for("vllm").launch_command(suite, "python", "127.0.0.1", 1,
                                                 Models("/t", "/d"))
    lines = [[*command[2:], flag, "3" if "tokens" in flag or flag == "--see" else '"ngram"']
             for flag in REFUSED_FORMS]
    return dict(zip(REFUSED_FORMS, parse_lines(lines), strict=True))


@pytest.mark.parametrize("flag", REFUSED_FORMS)
def test_the_forms_the_harness_refuses_do_reach_an_owned_setting(
        flag: str, parsed_forms: dict[str, dict]) -> None:
    """vLLM's parser really reads these forms as the owned flag (so refusing them is right)."""
    parsed = parsed_forms[flag]
    if flag == "--see":
        assert parsed["seed"] == 3
    elif "tokens" in flag:
        assert parsed["speculative_config"]["num_speculative_tokens"] == 3
    else:
        assert parsed["speculative_config"]["method"] == "ngram"


def test_vllms_metrics_code_gives_the_counts_the_adapter_reads() -> None:
    k = 7
    requests = [[3, 0, 7, 2], [1, 1], [0]]
    out = run_vllm(METRICS, json.dumps([k, requests]))
    for steps, figures in zip(requests, out["requests"], strict=True):
        tokens = 1 + sum(a + 1 for a in steps)  # the prefill token, then each step's
        payload = {"choices": [{"text": "", "finish_reason": "stop"}],
                   "usage": {"prompt_tokens": 1, "completion_tokens": tokens},
                   "metrics": {"speculative_decoding": figures}}
        parsed = api.parse_generate(payload)
        assert parsed.verify_steps == len(steps)
        assert parsed.correct_drafts == sum(steps)
        assert figures["mean_acceptance_length"] == pytest.approx(1 + sum(steps) / len(steps))
    server = out["server"]
    counters = {api.DRAFTS: server["num_drafts"], api.DRAFT_TOKENS: server["num_draft_tokens"],
                api.ACCEPTED: server["num_accepted_tokens"], api.PER_POSITION: server["per_pos"]}
    flat = [a for steps in requests for a in steps]
    # vLLM's figure is the harness's server_avg: (Σ accepted + Σ steps) / Σ steps
    assert api.server_accept_length(counters) == pytest.approx((sum(flat) + len(flat))
                                                               / len(flat))
    rates = api.position_rates(counters)
    assert rates == pytest.approx([sum(a > i for a in flat) / len(flat) for i in range(k)])
    assert api.window_mismatches(len(flat), sum(flat), counters) == []


def test_vllms_resolver_on_the_shipped_draft_shape(tmp_path: Path) -> None:
    """The gemma-4 shape (4 sliding + 1 full): vLLM's V1 runner refuses it; its per-layer
    rule makes sliding layers causal with the window and the full layer bidirectional."""
    out = vllm_layers(vllm_python(), DRAFT / "config.json")  # vLLM's own loader, resolver
    assert out["config_class"] == "Qwen3Config"  # what vLLM's get_config made of it
    assert out["v1_refuses"] and "mixed sliding/full" in out["v1_refuses"]
    assert [(r["window"], r["causal"]) for r in out["layers"]] == [(16, True)] * 4 + \
        [(None, False)]
    config = json.loads((DRAFT / "config.json").read_text())
    config["layer_types"] = ["sliding_attention"] * 5
    (tmp_path / "draft.json").write_text(json.dumps(config))  # any file name
    uniform = vllm_layers(vllm_python(), tmp_path / "draft.json")
    assert uniform["v1_refuses"] is None
    assert [(r["window"], r["causal"]) for r in uniform["layers"]] == [(16, True)] * 5


def test_the_harness_finds_the_stop_string_vllms_detokenizer_finds() -> None:
    """harness.engines.vllm.stops.first_stop against vLLM's own check_stop_strings on
    random texts and stop lists (overlapping, repeated, nested stop strings)."""
    import random

    from harness.engines.vllm.stops import first_stop

    rng = random.Random(0)
    alphabet = ["a", "b", "Q", "Question", ":", "\n", " ", "é"]
    cases = []
    for _ in range(400):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 25)))
        stops = ["".join(rng.choice(alphabet[:5]) for _ in range(rng.randint(1, 3)))
                 for _ in range(rng.randint(1, 3))] + rng.choice([[], ["Question"], [":"]])
        cases.append([text, stops])
    theirs = run_vllm(STOP_CHECK, json.dumps(cases))
    for (text, stops), found in zip(cases, theirs, strict=True):
        ours = first_stop(text, stops)
        if found is None:
            assert ours is None, (text, stops)
        else:
            stop, start = found
            assert ours is not None and ours[0] == start, (text, stops, found, ours)
            assert text[start:start + len(stop)] == stop and ours[1] == start + len(stop)
