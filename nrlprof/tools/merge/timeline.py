"""Merge every torch trace of a run (and optionally Ray's timeline) into one Chrome/Perfetto trace.

Streaming, one batch of events at a time, so memory stays bounded whatever the input size:
- timestamps move onto the earliest `baseTimeNanoseconds` of the inputs (kept as the output's);
- processes get new integer pids, one per (host, pid, rank, worker, original pid), named
  `<worker> rank <r> (<host>)` or `controller (<host>)` by `process_name` metadata events;
- flow ids (`id`) and `args.correlation` / `args["External id"]` of the i-th input move up by i * 2**40 so
  they stay distinct; ids that are not integers in [0, 2**40) become strings prefixed `<i>:`;
- every input event is written; the only additions are one `process_name` event per new pid and the memory
  backend's figures found under the inputs, as counter tracks of their process (memory_tracks.py).
(The rewriting of each event: rewrite.py.)

Each input becomes a "part" (its rewritten events, gzip-compressed when the output is) in a temporary
directory beside the output, then parts are appended in order into one gzip member (gzip_member.py).
Pids and ids depend only on the input's place in the sorted list, so parts can be written by several
processes at once (`jobs`).

Bad inputs: a trace that cannot be read (not JSON, cut short, damaged gzip, nested too deep, an event
that is not an object or values of types a trace does not hold) is skipped with its reason in
`MergeResult.skipped`, its part dropped, and the output holds every other trace. With `strict=True` the
first bad trace raises ToolError instead. A missing input, or inputs holding no trace (nor memory figures), raise
ToolError; when every trace is skipped, the output holds none of them.
The output is written under a temporary name and renamed into place only when complete; on any error
nothing is left at `output`.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from nrlprof.errors import ToolError
from nrlprof.tools.merge.gzip_member import DeflateStream, gzip_header, gzip_trailer
from nrlprof.tools.merge.memory_tracks import earliest_us, group_key, memory_counter_tracks
from nrlprof.tools.merge.rewrite import PID_BLOCK, RayRewriter, TraceRewriter
from nrlprof.tools.output import AtomicOutput, check_output
from nrlprof.tools.progress import ProgressCallback
from nrlprof.tools.read.inputs import find_inputs
from nrlprof.tools.read.memory import read_memory_files
from nrlprof.tools.read.traces import (
    ReadProgress,
    TraceHeader,
    check_events,
    gc_paused,
    iter_chrome_events,
    iter_event_batches,
    read_headers,
    unexpected_content,
)

_BYTES_PER_JOB = 256 << 20  # a worker process costs ~0.5 s to start: worth it past this much input
# Values of types the rewriter does not expect (a hostile or foreign trace): the trace is skipped.
_CONTENT_ERRORS = (TypeError, AttributeError, ValueError, KeyError, OverflowError, RecursionError)


@dataclass
class MergeResult:
    output: Path
    merged: list[Path] = field(default_factory=list)
    skipped: list[tuple[Path, str]] = field(default_factory=list)
    events_in: int = 0
    events_added: int = 0
    bytes_in: int = 0
    seconds: float = 0.0
    jobs: int = 1
    processes: dict[int, str] = field(default_factory=dict)
    memory_files: int = 0
    counter_events: int = 0
    unplaced: list[tuple[Path, str]] = field(default_factory=list)  # memory figures with no place on the clock
    anatomy_events: int = 0  # step-anatomy spans: every worker group's calls, profiled or not

    @property
    def events_out(self) -> int:
        return self.events_in + self.events_added

    def to_json(self) -> dict[str, Any]:
        return {
            "output": str(self.output),
            "merged": [str(p) for p in self.merged],
            "skipped": [{"path": str(p), "reason": reason} for p, reason in self.skipped],
            "events_in": self.events_in,
            "events_added": self.events_added,
            "events_out": self.events_out,
            "bytes_in": self.bytes_in,
            "seconds": round(self.seconds, 3),
            "jobs": self.jobs,
            "processes": {str(pid): name for pid, name in self.processes.items()},
            "memory_files": self.memory_files,
            "counter_events": self.counter_events,
            "anatomy_events": self.anatomy_events,
            "unplaced": [{"path": str(p), "reason": reason} for p, reason in self.unplaced],
        }


def merge_traces(
    inputs: list[Path],
    output: Path,
    ray_timeline: Path | None = None,
    progress: ProgressCallback | None = None,
    strict: bool = False,
    jobs: int | None = None,
    compress_level: int = 1,
) -> MergeResult:
    """Merge the traces found under `inputs` into `output` (gzipped when it ends with `.gz`).

    `jobs`: processes reading traces at once; by default one per CPU, at most one per 256 MiB of input.
    """
    started = time.perf_counter()
    output = Path(output)
    found = find_inputs([Path(p) for p in inputs])  # the one walk of the inputs
    headers, unreadable = read_headers(found.traces, exclude=[output])
    memory_files, memory_unreadable = read_memory_files(found.memory_figures)
    unreadable = [*unreadable, *memory_unreadable]
    if unreadable and strict:
        raise ToolError(unreadable[0][1], unreadable[0][0])
    memory_origin_us = earliest_us(memory_files)
    if not headers and not unreadable and not memory_files:
        raise ToolError("no readable torch trace found", ", ".join(map(str, inputs)))
    if ray_timeline is not None and not Path(ray_timeline).is_file():
        raise ToolError("Ray timeline not found", ray_timeline)
    check_output(output)
    headers.sort(key=TraceHeader.sort_key)
    sizes = {h.path: h.path.stat().st_size for h in headers}
    result = MergeResult(output, skipped=list(unreadable), jobs=jobs or _default_jobs(sum(sizes.values()), headers))
    origin_ns = min(
        [h.base_time_ns for h in headers] + ([int(memory_origin_us * 1000)] if memory_origin_us is not None else []),
        default=0,
    )
    groups: dict[tuple[Any, ...], int] = {}
    for header in headers:
        groups.setdefault(_group_key(header), len(groups))
    traced_groups = len(groups)
    for memory_file in memory_files:
        groups.setdefault(group_key(memory_file), len(groups))
    memory_groups = {group_key(f) for f in memory_files}
    meter = _Meter(progress, sum(sizes.values()) + (Path(ray_timeline).stat().st_size if ray_timeline else 0))
    parts_dir = Path(tempfile.mkdtemp(dir=output.parent, prefix=f".{output.name}.parts."))
    sink = _Sink(output, compress_level)
    try:
        level = compress_level if sink.compressed else None
        tasks = [
            _Task(
                h.path,
                i,
                groups[_group_key(h)],
                h.label,
                h.pid,
                (h.base_time_ns - origin_ns) / 1000,
                parts_dir / f"{i}.part",
                level,
                _group_key(h) in memory_groups,
            )
            for i, h in enumerate(headers)
        ]
        sink.write(_document_head(origin_ns))
        names: dict[int, str] = {}
        step_ends: dict[tuple[Any, ...], dict[int, tuple[float, float]]] = {}
        for part in _parts(tasks, result.jobs, meter):
            if part.error is not None:
                if strict:
                    raise ToolError(part.error, part.task.path)
                result.skipped.append((part.task.path, part.error))
                continue
            sink.append_part(part)
            part.task.part.unlink()
            names.update(part.names)
            if part.step_ends:
                step_ends.setdefault(_group_key(headers[part.task.index]), {}).update(part.step_ends)
            result.merged.append(part.task.path)
            result.events_in += part.events
            result.bytes_in += sizes[part.task.path]
        counters = memory_counter_tracks(memory_files, origin_ns, groups, traced_groups, step_ends, names)
        result.unplaced.extend(counters.skipped)
        sink.write_events(counters.events)
        result.memory_files, result.counter_events = counters.files, len(counters.events)
        from nrlprof.tools.merge.anatomy_tracks import anatomy_tracks  # only once the traces are merged

        anatomy = anatomy_tracks(inputs, found.anatomy_dirs, origin_ns, PID_BLOCK * (len(groups) + 2))
        sink.write_events(anatomy)
        result.anatomy_events = len(anatomy)
        if ray_timeline is not None:
            ray = RayRewriter(-origin_ns / 1000, PID_BLOCK * (len(groups) + 1))
            with gc_paused():
                for batch in iter_chrome_events(Path(ray_timeline)):
                    try:
                        ray.rewrite(batch)
                    except _CONTENT_ERRORS as exc:
                        check_events(batch, Path(ray_timeline))
                        raise ToolError(unexpected_content(exc), ray_timeline) from exc
                    sink.write_events(batch)
            names.update(ray.names)
            result.events_in += ray.count
            result.bytes_in += Path(ray_timeline).stat().st_size
        result.processes = dict(sorted(names.items()))
        added = [
            {"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": name}}
            for pid, name in result.processes.items()
        ]
        sink.write_events(added)
        result.events_added = len(added) + result.counter_events
        sink.write(_document_tail(result))
        sink.commit()
    except BaseException:
        sink.abort()
        raise
    finally:
        shutil.rmtree(parts_dir, ignore_errors=True)
    result.seconds = time.perf_counter() - started
    meter.finish()
    return result


def _default_jobs(total_bytes: int, headers: list[TraceHeader]) -> int:
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, min(cpus, len(headers), total_bytes // _BYTES_PER_JOB))


def _group_key(header: TraceHeader) -> tuple[Any, ...]:
    return (header.host, header.pid, header.rank, header.worker)


def _document_head(origin_ns: int) -> bytes:
    head = {
        "schemaVersion": 1,
        "displayTimeUnit": "ms",
        "baseTimeNanoseconds": origin_ns,
        "nrlprof": {"merged": True, "backend": "merge"},
    }
    return orjson.dumps(head)[:-1] + b',"traceEvents":[\n'


def _document_tail(result: MergeResult) -> bytes:
    sources = orjson.dumps([str(p) for p in result.merged])
    return b'\n],"nrlprofSources":' + sources + b',"traceName":' + orjson.dumps(str(result.output)) + b"}\n"


@dataclass(frozen=True)
class _Task:
    """One input and everything needed to rewrite it on its own, in any process."""

    path: Path
    index: int
    group: int
    label: str
    main_pid: int | None
    ts_offset: float
    part: Path
    compress_level: int | None
    collect_steps: bool = False


@dataclass
class _Part:
    task: _Task
    events: int = 0
    names: dict[int, str] = field(default_factory=dict)
    crc: int = 0
    size: int = 0
    error: str | None = None
    step_ends: dict[int, tuple[float, float]] = field(default_factory=dict)


def _parts(tasks: list[_Task], jobs: int, meter: _Meter) -> Iterable[_Part]:
    """The parts, in task order; with jobs > 1, tasks beyond this process's share go to worker processes."""
    if jobs <= 1:
        for task in tasks:
            yield _write_part(task, meter.reader())
            meter.done(task.path.stat().st_size)
        return
    context = multiprocessing.get_context(
        "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"
    )
    with ProcessPoolExecutor(jobs - 1, mp_context=context) as pool:
        futures: dict[int, Future[_Part]] = {
            t.index: pool.submit(_write_part, t) for t in tasks if t.index % jobs != 0
        }  # fmt: skip
        try:
            for task in tasks:
                part = futures[task.index].result() if task.index in futures else _write_part(task, meter.reader())
                meter.done(task.path.stat().st_size)
                yield part
        finally:
            for future in futures.values():
                future.cancel()


def _write_part(task: _Task, progress: ReadProgress | None = None) -> _Part:
    """Rewrite one trace into its part file; a trace that cannot be read gives a part with `error` set."""
    part = _Part(task)
    rewriter = TraceRewriter(task)
    try:
        with gc_paused(), _Segment(task.part, task.compress_level) as segment:
            for batch in iter_event_batches(task.path, progress):
                try:
                    rewriter.rewrite(batch)
                except (TypeError, AttributeError):
                    check_events(batch, task.path)
                    raise
                segment.write_events(batch)
        part.crc, part.size = segment.crc, segment.size
    except ToolError as exc:
        task.part.unlink(missing_ok=True)
        part.error = exc.reason
    except _CONTENT_ERRORS as exc:
        task.part.unlink(missing_ok=True)
        part.error = unexpected_content(exc)
    part.events, part.names = rewriter.count, rewriter.names
    part.step_ends = rewriter.step_ends or {}
    return part


def _event_text(events: list[dict[str, Any]], first: bool) -> bytes:
    """The events as JSON array items, a line per batch, led by a comma unless they come first."""
    try:
        text = orjson.dumps(events)
    except TypeError:  # an integer beyond 64 bits, which orjson refuses
        text = json.dumps(events, separators=(",", ":")).encode()
    return text[1:-1] if first else b",\n" + text[1:-1]


class _Segment:
    """A part file: array items, raw deflate ending in a full flush when compressed."""

    def __init__(self, path: Path, compress_level: int | None) -> None:
        self._file: BinaryIO = open(path, "wb", buffering=1 << 20)  # noqa: SIM115 - closed by __exit__
        self._deflate = DeflateStream(self._file, compress_level) if compress_level else None
        self.events = 0

    @property
    def crc(self) -> int:
        return self._deflate.crc if self._deflate is not None else 0

    @property
    def size(self) -> int:
        return self._deflate.size if self._deflate is not None else 0

    def write_events(self, events: list[dict[str, Any]]) -> None:
        if not events:
            return
        data = _event_text(events, first=not self.events)
        self.events += len(events)
        if self._deflate is None:
            self._file.write(data)
        else:
            self._deflate.write(data)

    def __enter__(self) -> _Segment:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._deflate is not None and exc[0] is None:
            self._deflate.full_flush()
        self._file.close()


class _Sink:
    """The output under a temporary name in its directory, renamed into place by `commit()`.

    A `.gz` output is one gzip member: this object's own deflate stream, fully flushed wherever a part
    is spliced in (each part ends in a full flush too), its CRC combined from the pieces'.
    """

    def __init__(self, path: Path, compress_level: int) -> None:
        self.path = path
        self.compressed = path.name.endswith(".gz")
        self._output = AtomicOutput(path, buffering=1 << 20)
        self._file: BinaryIO = self._output.file
        self._deflate = DeflateStream(self._file, compress_level) if self.compressed else None
        self._events = 0
        if self._deflate is not None:
            self._file.write(gzip_header())

    def write_events(self, events: list[dict[str, Any]]) -> None:
        if events:
            self.write(_event_text(events, first=not self._events))
            self._events += len(events)

    def write(self, data: bytes) -> None:
        if self._deflate is None:
            self._file.write(data)
        else:
            self._deflate.write(data)

    def append_part(self, part: _Part) -> None:
        if not part.events:
            return
        if self._events:
            self.write(b",\n")
        self._events += part.events
        if self._deflate is not None:
            self._deflate.full_flush()
            self._deflate.splice(part.crc, part.size)
        with open(part.task.part, "rb") as source:
            shutil.copyfileobj(source, self._file, 1 << 20)

    def commit(self) -> None:
        if self._deflate is not None:
            self._deflate.finish()
            self._file.write(gzip_trailer(self._deflate.crc, self._deflate.size))
        self._output.commit()

    def abort(self) -> None:
        self._output.abort()


class _Meter:
    """Progress over the inputs' bytes on disk."""

    def __init__(self, progress: ProgressCallback | None, total: int) -> None:
        self.progress = progress
        self.total = total
        self.finished = 0

    def reader(self) -> Callable[[int], None] | None:
        if self.progress is None:
            return None
        progress, base, total = self.progress, self.finished, self.total
        return lambda consumed: progress(base + consumed, total)

    def done(self, size: int) -> None:
        self.finished += size
        if self.progress is not None:
            self.progress(self.finished, self.total)

    def finish(self) -> None:
        if self.progress is not None:
            self.progress(self.total, self.total)
