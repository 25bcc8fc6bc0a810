"""Reading several torch traces at once: this process and up to one reader process per further CPU.

This process reads its share while the others start and, done with it, takes back the traces no reader
process has begun.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from nrlprof.errors import ToolError
from nrlprof.log import logger
from nrlprof.tools.figures.trace_stats import read_trace_stats
from nrlprof.tools.progress import ByteMeter
from nrlprof.tools.read.pool import start_context, usable_cpus
from nrlprof.tools.read.traces import ReadProgress, TraceHeader, gc_paused, unexpected_content

PER_JOB_BYTES = 32 << 20  # below this much input per process, starting one costs more than it saves
# Values of types the reader does not expect (a hostile or foreign trace): the trace is skipped.
CONTENT_ERRORS = (TypeError, AttributeError, ValueError, KeyError, OverflowError, RecursionError)
READER_DIED = "a reader process died (killed, or out of memory?) before this trace was read"

Reader = Callable[[TraceHeader, ReadProgress | None], Any]


def default_jobs(headers: list[TraceHeader]) -> int:
    """One process per usable CPU, per trace and per PER_JOB_BYTES of input, whichever is fewest."""
    cpus = usable_cpus()
    total = sum(h.path.stat().st_size for h in headers)
    return max(1, min(cpus, len(headers), 1 + total // PER_JOB_BYTES))


def read_one(header: TraceHeader, progress: ReadProgress | None = None) -> Any:
    """The trace's statistics, or the reason it cannot be read (a string)."""
    try:
        with gc_paused():
            return read_trace_stats(header, progress)
    except ToolError as exc:
        return exc.reason
    except CONTENT_ERRORS as exc:
        return unexpected_content(exc)


def read_traces(
    headers: list[TraceHeader],
    jobs: int,
    progress: Callable[[int, int], None] | None = None,
    reader: Reader = read_one,
) -> Iterator[tuple[TraceHeader, Any]]:
    """(header, statistics or reason) for each trace, in the order given; `progress` gets (bytes done, total).

    `reader` must be importable by name in a fresh process: the reader processes call it too.
    """
    sizes = [h.path.stat().st_size for h in headers]
    meter = ByteMeter(sum(sizes), progress)
    if jobs <= 1 or len(headers) <= 1:
        for header, size in zip(headers, sizes, strict=True):
            yield header, _read_here(reader, header, size, meter)
        return
    own, pooled = split_work(sizes, jobs)
    outcomes: dict[int, Any] = {}
    context = start_context(__name__)
    with ProcessPoolExecutor(jobs - 1, mp_context=context) as pool:
        futures: dict[int, Future] = {}

        def submit() -> None:  # what could not be handed over is read here
            try:
                for index in pooled:
                    futures[index] = future = pool.submit(reader, headers[index], None)
                    future.add_done_callback(lambda done, size=sizes[index]: done.cancelled() or meter.add(size))
            except (OSError, RuntimeError) as exc:  # no reader process could start (BrokenProcessPool is one)
                logger.warning("reading the traces in this process alone: %s", exc)

        submitter = None
        if context.get_start_method() == "fork":
            submit()  # forks the readers now, while this process has no other thread
        else:  # the first submit waits for the forkserver to start: in a thread, not before this process reads
            submitter = threading.Thread(target=submit, name="nrlprof-trace-pool", daemon=True)
            submitter.start()
        for index in own:
            outcomes[index] = _read_here(reader, headers[index], sizes[index], meter)
        if submitter is not None:
            submitter.join()
        for index in reversed(pooled):
            future = futures.get(index)
            if future is None or future.cancel():  # no reader process has begun it
                outcomes[index] = _read_here(reader, headers[index], sizes[index], meter)
        for index, future in futures.items():
            if index not in outcomes:
                outcomes[index] = _pooled_outcome(future)
    for index, header in enumerate(headers):
        yield header, outcomes[index]


def split_work(sizes: list[int], jobs: int) -> tuple[list[int], list[int]]:
    """Indices of the files for this process, and for the reader processes (the largest first).

    Each file, largest first, goes to the least loaded of `jobs` readers; this process is the first of them.
    """
    loads = [0] * jobs
    own, pooled = [], []
    for index in sorted(range(len(sizes)), key=lambda i: -sizes[i]):
        least = loads.index(min(loads))
        loads[least] += sizes[index]
        (own if least == 0 else pooled).append(index)
    return sorted(own), pooled


def _read_here(reader: Reader, header: TraceHeader, size: int, meter: ByteMeter) -> Any:
    seen = 0

    def tick(consumed: int) -> None:
        nonlocal seen
        meter.add(consumed - seen)
        seen = consumed

    outcome = reader(header, tick)
    meter.add(size - seen)
    return outcome


def _pooled_outcome(future: Future) -> Any:
    try:
        return future.result()
    except BrokenProcessPool:
        return READER_DIED
