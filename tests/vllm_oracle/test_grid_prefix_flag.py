"""The workload grid's prefix-caching launches of a vLLM suite, parsed by vLLM's own
`serve` parser (`nox -s vllm_cpu`): the line of each setting (`harness grid`'s derived
suite, with the flag of `harness.suite.prefix_caching.PREFIX_CACHES`) lands in
`enable_prefix_caching` as the setting says, and the rest of the line as the suite's."""

from __future__ import annotations

from pathlib import Path

from harness.engines.registry import adapter_for
from harness.protocols.grid import plan_launches
from harness.suite.checkpoints import Models
from harness.suite.model import LoadedSuite, parse_suite
from harness.suite.schema import document_sha256
from tests.suite.test_grid_refuses_bad_input import GOOD, suite_text
from tests.vllm_oracle.vllm_code import parse_lines, vllm_python

SUITE = Path(__file__).resolve().parents[2] / "suites" / "tiny_dflash_vllm_cpu.toml"


def test_each_setting_lands_in_enable_prefix_caching() -> None:
    vllm_python()  # skips (or fails under HARNESS_REQUIRE_VLLM) without vLLM's environment
    grid = {**GOOD, "prefix_caching": ["on", "off"],
            "reference": {"tier": "short", "concurrency": 1, "prefix_caching": "on"}}
    suite, document = parse_suite(suite_text(grid, SUITE), "grid.toml")
    loaded = LoadedSuite(suite=suite, path=SUITE, sha256=document_sha256(document),
                         document=document)
    launches = plan_launches(loaded)
    lines = [adapter_for("vllm").launch_command(
        derived.suite, "python", "127.0.0.1", 31234, Models("/models/target", "/models/draft"))
        for _, derived in launches]
    for (launch, _), parsed in zip(launches, parse_lines([line[2:] for line in lines]),
                                   strict=True):
        assert (parsed["enable_prefix_caching"], parsed["max_model_len"]) == (
            launch.caching == "on", 512)
