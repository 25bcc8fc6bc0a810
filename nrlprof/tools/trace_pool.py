"""Reading several torch traces at once: one process per CPU, at most one per PER_JOB_BYTES of input."""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from nrlprof.errors import ToolError
from nrlprof.tools.traces import TraceHeader, unexpected_content

PER_JOB_BYTES = 256 << 20
# Values of types the reader does not expect (a hostile or foreign trace): the trace is skipped.
CONTENT_ERRORS = (TypeError, AttributeError, ValueError, KeyError, OverflowError, RecursionError)


def default_jobs(headers: list[TraceHeader]) -> int:
    """One process per usable CPU, per trace and per PER_JOB_BYTES of input, whichever is fewest."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    total = sum(h.path.stat().st_size for h in headers)
    return max(1, min(cpus, len(headers), 1 + total // PER_JOB_BYTES))


def read_one(header: TraceHeader, progress: Callable[[int], None] | None = None) -> Any:
    """The trace's statistics, or the reason it cannot be read (a string)."""
    from nrlprof.tools.summary import read_trace_stats

    try:
        return read_trace_stats(header, progress)
    except ToolError as exc:
        return exc.reason
    except CONTENT_ERRORS as exc:
        return unexpected_content(exc)


def read_traces(
    headers: list[TraceHeader], jobs: int, progress: Callable[[int, int], None] | None = None
) -> Iterator[tuple[TraceHeader, Any]]:
    """(header, statistics or reason) for each trace, in the order given; `progress` gets (bytes done, total)."""
    sizes = [h.path.stat().st_size for h in headers]
    total, done = sum(sizes), 0
    if jobs <= 1 or len(headers) <= 1:
        for header, size in zip(headers, sizes, strict=True):
            tick = None if progress is None else (lambda consumed, base=done: progress(base + consumed, total))
            yield header, read_one(header, tick)
            done += size
        return
    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")
    with ProcessPoolExecutor(jobs, mp_context=context) as pool:
        futures = [pool.submit(read_one, header) for header in headers]
        for header, size, future in zip(headers, sizes, futures, strict=True):
            outcome = future.result()
            done += size
            if progress is not None:
                progress(done, total)
            yield header, outcome
