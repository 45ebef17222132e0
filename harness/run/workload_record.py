"""What a run's record keeps about its workload (`record.WorkloadInfo`): the protocol as
sent, the hashes that identify its prompts and their rendering, and where its rows came
from."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

from harness.results.record import RequestRow, WorkloadInfo
from harness.run.drive import first_turn
from harness.workloads import WorkloadPlan
from harness.workloads.chat import template_source

if TYPE_CHECKING:
    from harness.run.plan import ServedEngine
    from harness.suite.entries import Workload
    from harness.suite.model import Suite


def prompts_sha256(workload: Workload, plan: WorkloadPlan) -> str:
    """sha256 over the first request of every planned question as the harness sends it
    (the text, or the chat messages), one compact JSON value per line, in order."""
    lines = "".join(json.dumps(first_turn(workload, prompt), ensure_ascii=False,
                               separators=(",", ":")) + "\n" for prompt in plan.prompts)
    return hashlib.sha256(lines.encode("utf-8")).hexdigest()


def workload_info(suite: Suite, entry: str | None, plan: WorkloadPlan,
                  engine: ServedEngine | None) -> WorkloadInfo:
    workload = suite.workload
    chat = workload.protocol == "chat"
    adapter = engine.adapter if engine is not None else None
    route = None
    if adapter is not None:
        route = adapter.chat_path if chat else adapter.generate_path
    system = workload.system_prompt
    return WorkloadInfo(
        kind=workload.kind, entry=entry, protocol=workload.protocol, route=route,
        n_prompts=len(plan.prompts),
        categories=list(dict.fromkeys(prompt.category for prompt in plan.prompts)),
        temperature=workload.temperature, top_p=workload.top_p, top_k=workload.top_k,
        sampling_seed=workload.seed_base if workload.temperature > 0 else None,
        stop=list(plan.stop), chat_template_kwargs=dict(workload.chat_template_kwargs),
        system_prompt_sha256=hashlib.sha256(system.encode()).hexdigest() if system else None,
        prompts_sha256=prompts_sha256(workload, plan),
        data_source=plan.source, data_sha256=plan.sha256, data_file_sha256=plan.file_sha256)


def add_chat_template(info: WorkloadInfo | None, suite: Suite, engine: ServedEngine | None
                      ) -> None:
    """The target's chat template hash, for a chat workload (after the server has loaded
    the model, so a hub model's files are in the local cache)."""
    if info is None or info.protocol != "chat" or engine is None:
        return
    models = getattr(engine, "models", None)
    override = getattr(engine.adapter, "chat_template_override", lambda s: None)(suite)
    found = template_source(models.target if models else None,
                            models.target_revision if models else None, override)
    if found is not None:
        info.chat_template_sha256, info.chat_template_source = found


def rendered_sha256(rows: Sequence[RequestRow], n_prompts: int) -> str | None:
    """sha256 over the server's first-turn prompt token-id hashes in question order;
    None unless the server returned them for every planned question."""
    first = sorted((row for row in rows if row.turn == 0), key=lambda row: row.index)
    hashes = [row.prompt_sha256 for row in first]
    if len(hashes) != n_prompts or None in hashes:
        return None
    return hashlib.sha256("".join(f"{h}\n" for h in hashes).encode()).hexdigest()
