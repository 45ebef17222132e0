"""A decoding worker process: loads the models once, then decodes one request at a time.

Why processes, not one batched forward: batched float math is not row-invariant on CPU
(a [1, H] x W GEMM takes MKL's GEMV path, a [B, H] x W one a blocked GEMM that sums in
another order; padded attention changes the reduction length), so a request's greedy
tokens and counts would depend on which requests happened to share its batch, and so on
arrival order. Each worker runs exactly the one-request arithmetic of `decoding.py` with
a fixed thread count, so a request's output and counts are bit-identical whichever worker
serves it and whatever runs beside it, and N workers decode N requests in parallel.

Messages to the server (one shared queue): ("ready", worker, info), ("load_error",
worker, message), ("start", job, worker), ("step", job, kept output ids or None),
("done", job, Generation.to_dict()), ("error", job, message).
"""

from __future__ import annotations

import traceback
from multiprocessing.queues import Queue
from typing import Any

from reference_engine.loading import (
    WORKER_UNUSED,
    CheckpointError,
    Options,
    configure_torch,
    keep_out,
    load_decoder,
    set_reproducible_env,
)


def error_text(error: BaseException) -> str:
    """Never empty: the message, else the exception's type."""
    text = str(error).strip()
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def run_worker(index: int, options: Options, jobs: Queue, events: Queue) -> None:
    set_reproducible_env()
    keep_out(WORKER_UNUSED)
    try:
        threads = configure_torch(options.threads, options.interop_threads)
        decoder, applied = load_decoder(options)
    except CheckpointError as error:
        events.put(("load_error", index, str(error)))
        return
    except Exception as error:
        events.put(("load_error", index, f"worker {index} failed to start: "
                                          f"{error_text(error)}"))
        return
    events.put(("ready", index, {"attention_applied": applied, **threads,
                                 "block_size": decoder.block_size}))
    while True:
        job = jobs.get()
        if job is None:
            return
        job_id, prompt_ids, kwargs, stream = job
        events.put(("start", job_id, index))

        def on_step(ids: list[int], job_id: Any = job_id, stream: bool = stream) -> None:
            events.put(("step", job_id, ids if stream else None))

        try:
            generation = decoder.generate(prompt_ids, on_step=on_step, **kwargs)
        except Exception as error:
            traceback.print_exc()
            events.put(("error", job_id, error_text(error)))
            continue
        events.put(("done", job_id, generation.to_dict()))
