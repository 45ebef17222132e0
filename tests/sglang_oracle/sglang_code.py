"""One SGLang release's own speculative-decoding bookkeeping, bound to small stand-ins.

Everything that decides a figure runs from the release's wheel (see `extract`):
- `Req.update_finish_state` and the helpers it calls (schedule_batch.py): where a request
  stops (stop string, EOS, max_new_tokens) and so `completion_tokens`;
- `SchedulerBatchResultProcessor._resolve_spec_v2_tokens` (batch_result_processor.py): the
  per-request `spec_verify_ct`, `spec_num_correct_drafts` and histogram of one verify step;
- the metrics statements of `process_batch_result_decode` (same file): what one decode
  batch adds to the server counters (`update_spec_metrics`, metrics_reporter.py), the
  iteration count, and `report_decode_stats`' folding every `--decode-log-interval`;
- the `avg_spec_accept_length` of `/server_info` (0.5.23: internal_state.py
  `_add_speculative`/`_average_accept_length`; 0.5.17: scheduler.py `get_internal_state`);
- `TokenizerManager._calculate_spec_decoding_metrics` (tokenizer_manager.py): meta_info.
What stays ours is only what a GPU would do: which tokens the target accepts per step.
"""

from __future__ import annotations

import ast
import enum
import logging
import re
from collections.abc import Sequence
from http import HTTPStatus
from types import ModuleType, SimpleNamespace
from typing import Any

from . import extract as x

MANAGERS = "sglang/srt/managers/"
TOKENIZER_MANAGER = MANAGERS + "tokenizer_manager.py"
SCHEDULE_BATCH = MANAGERS + "schedule_batch.py"
METRICS_REPORTER = MANAGERS + "scheduler_components/metrics_reporter.py"
BATCH_RESULT = MANAGERS + "scheduler_components/batch_result_processor.py"
INTERNAL_STATE = MANAGERS + "scheduler_components/internal_state.py"
SCHEDULER = MANAGERS + "scheduler.py"
UTILS = MANAGERS + "utils.py"
RAGGED_VERIFY = "sglang/srt/speculative/ragged_verify.py"
UNO_WORKER = "sglang/srt/speculative/uno_worker_v2.py"
NON_DRAFT_FIELD = "num_non_draft_tokens_per_req"
FINISH_CLASSES = ("BaseFinishReason", "FINISH_MATCHED_TOKEN", "FINISH_MATCHED_STR",
                  "FINISHED_MATCHED_REGEX", "FINISH_LENGTH", "FINISH_ABORT")
SERVER_KEY = "avg_spec_accept_length"
_LOG = logging.getLogger("sglang_oracle")


class Rows(list):  # type: ignore[type-arg]
    """A list standing in for a CPU tensor (`.tolist()`, `.is_cpu`)."""

    is_cpu = True

    def tolist(self) -> list[Any]:
        return list(self)


class WordTokenizer:
    """One token per word (new words get new ids); `decode` joins words with spaces."""

    vocab_size = 1 << 20  # the model's vocabulary: every id this tokenizer hands out is below
    EOS = "<eos>"

    def __init__(self) -> None:
        self.words: list[str] = []
        self.index: dict[str, int] = {}
        self.eos_token_id = self.add(self.EOS)
        self.additional_stop_token_ids = None

    def add(self, word: str) -> int:
        if word not in self.index:
            self.index[word] = len(self.words)
            self.words.append(word)
        return self.index[word]

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = False) -> str:
        words = (self.words[i] for i in ids)
        return " ".join(w for w in words if not (skip_special_tokens and w == self.EOS))

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return [self.add(word) for word in text.split()]


def _ragged_verify_module(version: str) -> ModuleType:
    """`sglang.srt.speculative.ragged_verify` with its real enum, read at its default ("static")."""
    module = ModuleType("sglang.srt.speculative.ragged_verify")
    if x.has_member(version, RAGGED_VERIFY):
        src = x.source(version, RAGGED_VERIFY)
        namespace: dict[str, Any] = {"Enum": enum.Enum}
        x.compile_functions(src, x.module_classes(src, ["RaggedVerifyMode"]), namespace)
        mode = namespace["RaggedVerifyMode"]
        module.RaggedVerifyMode = mode  # type: ignore[attr-defined]
        module.read_ragged_verify_mode = lambda: mode("static")  # type: ignore[attr-defined]
    return module


def non_draft_tokens_per_req(version: str, algorithm: str) -> int:
    """The release's own tokens-per-verify-step besides the correct drafts for `algorithm`:
    the value its worker passes as `GenerationBatchResult(num_non_draft_tokens_per_req=)`
    (UNO: speculative/uno_worker_v2.py), else the field's default in managers/utils.py
    (1 where the field exists; a release without the field makes the bonus token only).
    Raises OracleError when the release has no such algorithm."""
    utils = x.source(version, UTILS).cls("GenerationBatchResult")
    default = x.class_defaults(utils).get(NON_DRAFT_FIELD, 1)
    if algorithm != "UNO":
        return int(default)
    if not x.has_member(version, UNO_WORKER):
        raise x.OracleError(f"sglang {version} has no UNO worker ({UNO_WORKER})")
    tree = x.source(version, UNO_WORKER).tree
    values = {node.value.value for call in ast.walk(tree) if isinstance(call, ast.Call)
              and getattr(call.func, "id", None) == "GenerationBatchResult"
              for node in call.keywords
              if node.arg == NON_DRAFT_FIELD and isinstance(node.value, ast.Constant)}
    if len(values) != 1:
        raise x.OracleError(f"sglang {version}: {UNO_WORKER} passes {NON_DRAFT_FIELD} as "
                            f"{sorted(values) or 'nothing constant'}")
    return int(values.pop())


def _is_return_gate(stmt: ast.stmt) -> bool:
    return (isinstance(stmt, ast.If) and not stmt.orelse and len(stmt.body) == 1
            and isinstance(stmt.body[0], ast.Return))


class SGLang:
    """SGLang `version`'s bookkeeping for one server: a block size and a log interval."""

    def __init__(self, version: str, num_draft_tokens: int, decode_log_interval: int = 40,
                 algorithm: str = "DFLASH") -> None:
        self.version = version
        self.num_draft_tokens = num_draft_tokens
        # tokens each verify step makes besides its correct drafts, from the release's code
        self.non_draft = non_draft_tokens_per_req(version, algorithm)
        self.spec = SimpleNamespace(speculative_algorithm=algorithm, speculative_num_steps=1,
                                    speculative_num_draft_tokens=num_draft_tokens)
        self.algorithm = SimpleNamespace(is_none=lambda: False, is_dspark=lambda: False)
        self._modules = {"sglang.srt.speculative.ragged_verify": _ragged_verify_module(version)}
        self._finish = self._finish_classes()
        self._req_class = self._bind_req()
        self.reporter = self._bind_reporter(decode_log_interval)
        self._processor = self._bind_processor()
        self._result_class, self._result_defaults = self._bind_result()
        self._average = self._bind_average()
        self._tokenizer_manager = self._bind_tokenizer_manager()
        self._skips_length_finishers = self._has_inflight_length_rule()

    # ------------------------------------------------------------------ binding

    def _finish_classes(self) -> dict[str, Any]:
        src = x.source(self.version, SCHEDULE_BATCH)
        namespace: dict[str, Any] = {"HTTPStatus": HTTPStatus}
        x.compile_functions(src, x.module_classes(src, FINISH_CLASSES), namespace)
        return {name: namespace[name] for name in FINISH_CLASSES}

    def _bind_req(self) -> type:
        src = x.source(self.version, SCHEDULE_BATCH)
        namespace = {"re": re, "logger": _LOG, "HTTPStatus": HTTPStatus, **self._finish}
        roots = ["update_finish_state", "output_ids_through_stop", "finished",
                 "update_spec_correct_drafts_histogram"]
        if "next_output_finishes_by_length" in x.methods(src.cls("Req")):
            roots.append("next_output_finishes_by_length")
        return x.build_class(src, "Req", roots,
                             namespace, modules=self._modules)

    def _bind_reporter(self, decode_log_interval: int) -> Any:
        src = x.source(self.version, METRICS_REPORTER)
        decode_stats = src.method("SchedulerMetricsReporter", "report_decode_stats")

        def keep(stmt: ast.stmt) -> bool:  # the interval gates and the speculative branch
            return _is_return_gate(stmt) or (
                isinstance(stmt, ast.If) and x.mentions(stmt.test, "spec_algorithm.is_none()"))

        args = [a.arg for a in decode_stats.args.args]
        args += [f"{a.arg}=None" for a in decode_stats.args.kwonlyargs]
        folded = x.sliced(decode_stats, keep, "report_decode_stats", args,
                          prelude="msg = ''\nspec_num_steps = 0\nspec_num_draft_tokens = 0",
                          epilogue="return msg")
        cls = x.build_class(
            src, "SchedulerMetricsReporter", ["update_spec_metrics", "reset_metrics"],
            {"get_spec": lambda: self.spec}, extra=[folded], modules=self._modules,
            stop=["_active_spec_config_snapshot"],
            replace={"snapshot_spec_decode_metrics": lambda *a, **k: None})
        init = x.literal_assignments(src.method("SchedulerMetricsReporter", "_init_metrics"))
        counters = {k: v for k, v in init.items() if k in cls._oracle_needs}  # type: ignore[attr-defined]
        scheduler = SimpleNamespace(spec_algorithm=self.algorithm, draft_worker=None)
        return x.instance(cls, **counters, decode_log_interval=decode_log_interval,
                          is_stats_logging_rank=True, current_scheduler_metrics_enabled=False,
                          scheduler=scheduler)

    def _bind_processor(self) -> Any:
        src = x.source(self.version, BATCH_RESULT)
        name = "SchedulerBatchResultProcessor"
        decode = src.method(name, "process_batch_result_decode")
        keep = x.with_dependencies(decode, lambda s: x.mentions(s, "metrics_reporter"))
        metrics = x.sliced(decode, keep, "_oracle_decode_metrics", ["self", "batch", "result"])
        namespace: dict[str, Any] = {}
        helpers = [f for f in ("_get_speculative_output_stride",)
                   if any(isinstance(n, ast.FunctionDef) and n.name == f for n in src.tree.body)]
        x.compile_functions(src, x.module_functions(src, helpers), namespace)
        cls = x.build_class(
            src, name, ["_resolve_spec_v2_tokens"], namespace, extra=[metrics],
            replace={"advance_grammar_fsm": lambda *a, **k: None})
        worker = SimpleNamespace(on_verify_complete_cpu=lambda *a, **k: None)
        return x.instance(cls, metrics_reporter=self.reporter, model_worker=worker)

    def _bind_result(self) -> tuple[type | None, dict[str, Any]]:
        src = x.source(self.version, UTILS)
        cls = src.cls("GenerationBatchResult")
        defaults = x.class_defaults(cls)
        if "get_num_generated_tokens" not in x.methods(cls):
            return None, defaults
        return x.build_class(src, "GenerationBatchResult", ["get_num_generated_tokens"],
                             {}), defaults

    def _bind_average(self) -> Any:
        """The function that writes `avg_spec_accept_length` into the internal state."""
        for member, class_name in ((INTERNAL_STATE, "SchedulerInternalStateController"),
                                   (SCHEDULER, "Scheduler")):
            if not x.has_member(self.version, member):
                continue
            src = x.source(self.version, member)
            try:
                cls = src.cls(class_name)
            except x.OracleError:
                continue
            for func in x.methods(cls).values():
                target = next((x.stores_key(s, SERVER_KEY) for s in func.body
                               if x.stores_key(s, SERVER_KEY)), None)
                if target is None or not isinstance(target.value, ast.Name):
                    continue
                params = [a.arg for a in func.args.args]
                scheduler = SimpleNamespace(spec_algorithm=self.algorithm, draft_worker=None,
                                            metrics_reporter=self.reporter)
                if target.value.id in params:  # SGLang factored it out: run the whole method
                    bound = x.build_class(src, class_name, [func.name], {})
                    return getattr(x.instance(bound, scheduler=scheduler), func.name)
                # Otherwise run only the statement that stores it, on a fresh dict.
                piece = x.sliced(func, lambda s: x.stores_key(s, SERVER_KEY) is not None,
                                 "_oracle_average", ["self", target.value.id])
                bound = x.build_class(src, class_name, [], {}, extra=[piece])
                attrs = {"spec_algorithm": self.algorithm, "metrics_reporter": self.reporter}
                return x.instance(bound, **attrs)._oracle_average
        raise x.OracleError(f"sglang {self.version}: no scheduler code stores {SERVER_KEY}")

    def _bind_tokenizer_manager(self) -> Any:
        src = x.source(self.version, TOKENIZER_MANAGER)
        cls = x.build_class(src, "TokenizerManager", ["_calculate_spec_decoding_metrics"],
                            {"get_spec": lambda: self.spec,
                             "_ragged_verify_cap_accept": lambda: False})
        attrs = {"server_args": self.spec} if "server_args" in cls._oracle_needs else {}  # type: ignore[attr-defined]
        return x.instance(cls, **attrs)

    def _has_inflight_length_rule(self) -> bool:
        """0.5.23: the overlap scheduler keeps requests that will surely finish by length
        out of the next batch (scheduler.py `_reqs_finishing_inflight`)."""
        scheduler = x.source(self.version, SCHEDULER).cls("Scheduler")
        return ("_reqs_finishing_inflight" in x.methods(scheduler)
                and hasattr(self._req_class, "next_output_finishes_by_length"))

    # ------------------------------------------------------------------ running

    def finishes_by_length_in_flight(self, req: Any) -> bool:
        """Whether the overlap scheduler leaves `req` out of the batch launched next."""
        return self._skips_length_finishers and bool(req.next_output_finishes_by_length())

    def new_request(self, rid: str, prompt_ids: Sequence[int], tokenizer: WordTokenizer,
                    max_new_tokens: int, stop: Sequence[str] = ()) -> Any:
        """A request as the scheduler holds it (SGLang's `Req` methods on stand-in state)."""
        stop_strs = list(stop)
        params = SimpleNamespace(
            max_new_tokens=max_new_tokens, stop_strs=stop_strs, stop_regex_strs=[],
            # SamplingParams.normalize with a tokenizer: the longest stop string in tokens.
            stop_str_max_len=max((len(tokenizer.encode(s)) for s in stop_strs), default=0),
            stop_regex_max_len=0, ignore_eos=False, stop_token_ids=set())
        return x.instance(
            self._req_class, rid=rid, output_ids=[], finished_reason=None, finished_len=None,
            to_finish=None, sampling_params=params, tokenizer=tokenizer, eos_token_ids=None,
            vocab_size=tokenizer.vocab_size, decoded_text="", grammar=None,
            spec_correct_drafts_histogram=[], spec_verify_ct=0, spec_num_correct_drafts=0,
            spec_num_block_accept_tokens=0, spec_num_cap_tokens=0, is_retracted=False,
            kv=SimpleNamespace(kv_committed_len=0), kv_committed_len=0,
            prompt_ids=list(prompt_ids))

    @staticmethod
    def prefill(req: Any, first_token: int) -> None:
        """The token sampled at prefill (no verify step) and SGLang's finish check on it."""
        req.output_ids.append(first_token)
        req.update_finish_state(1)

    def decode_batch(self, reqs: Sequence[Any], runs: Sequence[Sequence[int]]) -> None:
        """One verify step of a decode batch; `runs[i]`: the correct drafts + the step's
        `non_draft` tokens (the bonus; UNO: two) of row i.

        Rows of requests that already finished (an overlap-scheduler overshoot) are verified
        like the others: SGLang's code decides what counts them.
        """
        # a row holds the block's drafts and the non-draft tokens (UNO: forward width + 1)
        stride = self.num_draft_tokens + self.non_draft - 1
        padded = [token for run in runs for token in [*run, *[0] * (stride - len(run))]]
        fields = {**self._result_defaults, "num_correct_drafts": 0,
                  "accept_lens": Rows(len(run) for run in runs), "next_token_ids": Rows(padded),
                  "block_accept_lens": None, "cap_lens": None, "speculative_output_stride": None,
                  "speculative_num_draft_tokens": self.num_draft_tokens,
                  "grammar_retained_tokens": None,
                  "logits_output": None, "can_run_cuda_graph": False}
        if NON_DRAFT_FIELD in self._result_defaults:
            fields[NON_DRAFT_FIELD] = self.non_draft
        if stride != self.num_draft_tokens:
            fields["speculative_output_stride"] = stride
        if self._result_class is not None:
            result = x.instance(self._result_class, **fields)
        else:
            result = SimpleNamespace(**fields)
        batch = SimpleNamespace(reqs=list(reqs), spec_algorithm=self.algorithm,
                                forward_iter=None, batch_size=lambda: len(reqs))
        accepted = self._processor._resolve_spec_v2_tokens(result, batch)
        self._processor._oracle_decode_metrics(batch, result)
        # process_batch_result_decode's per-request loop, reduced to what sets the counts.
        for req, tokens in zip(reqs, accepted, strict=True):
            if req.finished():
                continue
            req.output_ids.extend(tokens)
            req.update_finish_state(len(tokens))

    def reset(self) -> None:
        """What `/flush_cache` does to the counters (Scheduler.flush_cache -> reset_metrics)."""
        self.reporter.reset_metrics()

    def server_average(self) -> float | None:
        """`/server_info` `internal_states[0].avg_spec_accept_length` (None: key absent)."""
        state: dict[str, Any] = {}
        self._average(state)
        return state.get(SERVER_KEY)

    def meta_info(self, reqs: Sequence[Any]) -> list[dict[str, Any]]:
        """The speculative meta_info keys of finished requests (`_calculate_spec_...`)."""
        recv = SimpleNamespace(
            spec_verify_ct=[r.spec_verify_ct for r in reqs],
            spec_num_correct_drafts=[r.spec_num_correct_drafts for r in reqs],
            completion_tokens=[len(r.output_ids_through_stop) for r in reqs],
            spec_correct_drafts_histogram=[r.spec_correct_drafts_histogram for r in reqs],
            spec_num_cap_tokens=[r.spec_num_cap_tokens for r in reqs],
            spec_num_block_accept_tokens=[r.spec_num_block_accept_tokens for r in reqs],
            spec_cap_lens_histogram=[[] for _ in reqs])
        metas = []
        for i in range(len(reqs)):
            meta: dict[str, Any] = {}
            self._tokenizer_manager._calculate_spec_decoding_metrics(meta, recv, i)
            metas.append(meta)
        return metas

    def finish_reason(self, req: Any) -> dict[str, Any] | None:
        return req.finished_reason.to_json() if req.finished_reason is not None else None
