"""The suite's [topology]: tp, dp (and DP attention), pp, nodes and a prefill/decode split,
checked for what they need (GPUs per node, DP attention's ranks), laid out over nodes as
SGLang lays them, and turned into each engine's launch flags."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.engines.interface import Placement
from harness.engines.reference_adapter import check_topology
from harness.engines.sglang.launch import launch_command as sglang_line
from harness.engines.vllm.launch import launch_command as vllm_line
from harness.errors import BadInput, SuiteError
from harness.suite.checkpoints import Models
from harness.suite.model import load_suite, parse_suite
from harness.suite.serving import Topology

SUITES = Path(__file__).resolve().parents[2] / "suites"


def suite_with(name: str, topology: str) -> str:
    text = (SUITES / f"{name}.toml").read_text()
    assert "[topology]\ngpus = 0\n" in text
    return text.replace("[topology]\ngpus = 0\n", f"[topology]\ngpus = 0\n{topology}\n")


def test_defaults_are_one_process() -> None:
    topology = Topology(gpus=0)
    assert topology.tensor_parallel_only and topology.dp_ranks == 1 and topology.world_gpus == 1
    assert list(topology.sides) == ["serve"]
    assert Topology(gpus=2, tp_size=2).tensor_parallel_only
    assert not Topology(gpus=0, dp_size=2).tensor_parallel_only


@pytest.mark.parametrize(("fields", "message"), [
    ({"gpus": 2, "tp_size": 4}, "tp_size 4 needs at least 4 gpus; the topology gives gpus 2"),
    ({"gpus": 2, "tp_size": 2, "dp_size": 2}, "tp_size 2 x dp_size 2 needs at least 4 gpus"),
    ({"gpus": 2, "tp_size": 2, "pp_size": 2, "nnodes": 1}, "tp_size 2 x pp_size 2 needs"),
    ({"gpus": 0, "dp_attention": True}, "dp_attention needs dp_size >= 2"),
    ({"gpus": 0, "tp_size": 2, "disaggregation": {}}, "per side"),
    ({"gpus": 1, "disaggregation": {"prefill": {"tp_size": 2}}},
     r"prefill \(2 gpus\) \+ decode \(1 gpus\) needs at least 3 gpus"),
    ({"gpus": 0, "nnodes": 0}, "greater than or equal to 1"),
    ({"gpus": 0, "tp_size": 1, "nnodes": 2}, "do not split evenly over nnodes 2"),
    ({"gpus": 0, "dp_size": "2"}, "valid integer"),
    ({"gpus": 0, "disaggregation": {"transfer_backend": "a b"}}, "pattern"),
])
def test_a_topology_that_cannot_be_is_refused(fields: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Topology.model_validate(fields)


def test_gpus_are_per_node() -> None:
    topology = Topology(gpus=4, tp_size=8, nnodes=2)
    assert topology.world_gpus == 8
    attention = Topology(gpus=8, tp_size=8, dp_size=8, dp_attention=True)
    assert attention.world_gpus == 8 and attention.dp_ranks == 8  # DP inside the TP group


def test_nodes_of_ranks_follow_sglangs_layout() -> None:
    assert Topology(gpus=0, dp_size=4).node_of_rank(3) == 0
    # DP attention over 2 nodes: TP 8 split 4 + 4, attention ranks of 2 TP ranks each
    split = Topology(gpus=4, tp_size=8, dp_size=4, dp_attention=True, nnodes=2)
    assert [split.node_of_rank(r) for r in range(4)] == [0, 0, 1, 1]
    # plain DP over several nodes: each rank's TP group spans the nodes
    assert Topology(gpus=2, tp_size=2, dp_size=2, nnodes=2).node_of_rank(0) is None


def test_a_suite_file_names_the_bad_field() -> None:
    with pytest.raises(SuiteError, match="topology"):
        parse_suite(suite_with("tiny_ngram_sglang_cpu", "dp_attention = true"), "x.toml")


def sglang_suite(topology: str):
    return parse_suite(suite_with("tiny_ngram_sglang_cpu", topology), "t.toml")[0]


def test_a_one_process_suites_line_is_unchanged() -> None:
    suite = load_suite("tiny_ngram_sglang_cpu").suite
    line = sglang_line(suite, "python", "127.0.0.1", 1)
    assert line[line.index("--tp-size"):line.index("--tp-size") + 4] == [
        "--tp-size", "1", "--random-seed", "0"]


def test_sglang_lines_carry_the_topology() -> None:
    suite = sglang_suite("tp_size = 2\ndp_size = 2\ndp_attention = true\npp_size = 1")
    line = sglang_line(suite, "python", "127.0.0.1", 1)
    assert line[line.index("--tp-size"):line.index("--random-seed")] == [
        "--tp-size", "2", "--dp-size", "2", "--enable-dp-attention"]
    nodes = sglang_suite("tp_size = 2\nnnodes = 2")
    with pytest.raises(BadInput, match="node 0's address"):
        sglang_line(nodes, "python", "127.0.0.1", 1)
    second = sglang_line(nodes, "python", "127.0.0.1", 1,
                         placement=Placement(1, 2, "127.0.0.1:5000"))
    assert "--nnodes 2 --node-rank 1 --dist-init-addr 127.0.0.1:5000" in " ".join(second)
    split = sglang_suite("[topology.disaggregation]\ntransfer_backend = \"nixl\"\n"
                         "decode = { tp_size = 2 }")
    decode = " ".join(sglang_line(split, "python", "h", 1, placement=Placement(
        side="decode", bootstrap_port=8998)))
    assert "--tp-size 2 --disaggregation-mode decode --disaggregation-transfer-backend nixl " \
           "--disaggregation-bootstrap-port 8998" in decode
    with pytest.raises(BadInput, match="no serve side"):
        sglang_line(split, "python", "h", 1)


@pytest.mark.parametrize("flag", ["--dp-size", "--data-parallel-size", "--enable-dp-attention",
                                  "--attn-dp-size", "--pp", "--nnodes", "--node-rank",
                                  "--dist-init-addr", "--nccl-init-addr",
                                  "--disaggregation-mode"])
def test_topology_flags_belong_to_the_suite_not_extra_args(flag: str) -> None:
    text = suite_with("tiny_ngram_sglang_cpu", "").replace(
        '"--decode-log-interval", "1",', f'"--decode-log-interval", "1", "{flag}", "2",')
    suite = parse_suite(text, "t.toml")[0]
    with pytest.raises(BadInput, match="may not set"):
        sglang_line(suite, "python", "127.0.0.1", 1)


def test_vllm_lines_carry_the_topology_or_refuse_it() -> None:
    text = (SUITES / "tiny_dflash_vllm_cpu.toml").read_text()
    assert "[topology]\ngpus = 0\n" in text

    def suite(topology: str):
        return parse_suite(text.replace("[topology]\ngpus = 0\n",
                                        f"[topology]\ngpus = 0\n{topology}\n"), "v.toml")[0]

    models = Models("/t", "/d")
    line = vllm_line(suite("tp_size = 2\npp_size = 2\nnnodes = 2"), "python", "h", 1, models,
                     Placement(1, 2, "10.0.0.1:29500"))
    assert "--tensor-parallel-size 2 --pipeline-parallel-size 2 --nnodes 2 --node-rank 1 " \
           "--master-addr 10.0.0.1 --master-port 29500 --headless" in " ".join(line)
    with pytest.raises(BadInput, match="SGLang's switch"):
        vllm_line(suite("dp_size = 2\ndp_attention = true"), "python", "h", 1, models)
    with pytest.raises(BadInput, match="no figure per DP rank"):
        vllm_line(suite("dp_size = 2"), "python", "h", 1, models)
    with pytest.raises(BadInput, match="--server URL"):
        vllm_line(suite("[topology.disaggregation]"), "python", "h", 1, models)


def test_the_reference_engine_runs_dp_only() -> None:
    text = (SUITES / "tiny_dflash_cpu.toml").read_text()
    ok = parse_suite(text.replace("gpus = 0", "gpus = 0\ndp_size = 2"), "r.toml")[0]
    check_topology(ok)
    bad = parse_suite(text.replace("gpus = 0", "gpus = 0\ntp_size = 2\nnnodes = 2"), "r.toml")[0]
    with pytest.raises(BadInput, match=r"topology\.tp_size, topology\.nnodes"):
        check_topology(bad)


sizes = st.one_of(st.integers(-3, 2000), st.text(max_size=3), st.none(), st.floats(),
                  st.booleans())


@settings(max_examples=300, deadline=None)
@given(st.fixed_dictionaries({"gpus": sizes}, optional={
    "tp_size": sizes, "dp_size": sizes, "pp_size": sizes, "nnodes": sizes,
    "dp_attention": st.one_of(st.booleans(), st.integers(), st.text(max_size=2))}))
def test_any_topology_is_refused_cleanly_or_consistent(fields: dict) -> None:
    try:
        topology = Topology.model_validate(fields)
    except ValueError:
        return  # pydantic's ValidationError: the suite loader names the field
    assert topology.world_gpus >= 1 and topology.world_gpus % topology.nnodes == 0
    if topology.gpus:
        assert topology.world_gpus <= topology.gpus * topology.nnodes
    for rank in range(topology.dp_ranks):
        node = topology.node_of_rank(rank)
        assert node is None or 0 <= node < topology.nnodes


def test_a_host_that_cannot_hold_every_node_is_skipped() -> None:
    from harness.results.record import GPUInfo
    from harness.run.preflight import check_fit

    two = [GPUInfo(index=i, name="NVIDIA H100", memory_gib=80.0) for i in range(2)]
    fit = check_fit(Topology(gpus=2, tp_size=4, nnodes=2), two)
    assert not fit.fits
    assert "needs 4 x GPU (2 per node x 2 nodes), found 2" in fit.reason
    four = [*two, *(GPUInfo(index=i, name="NVIDIA H100", memory_gib=80.0) for i in (2, 3))]
    assert check_fit(Topology(gpus=2, tp_size=4, nnodes=2), four).devices == (0, 1, 2, 3)
