"""Merge every torch trace of a run, its Nsight Systems captures, memory figures and step anatomy (and optionally
Ray's timeline) into one Chrome/Perfetto trace. Any of them alone is enough: an nsys-only or anatomy-only run
merges too.

How (streaming in bounded memory, new pids and ids, parts written in parallel, bad inputs, an output never
left half-written): docs/design.md, "How merge builds one timeline".
"""

from __future__ import annotations

import multiprocessing
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from nrlprof.errors import ToolError
from nrlprof.tools.merge import estimate as sizes
from nrlprof.tools.merge.anatomy_tracks import anatomy_trace_events, find_anatomy_run
from nrlprof.tools.merge.estimate import SizedTrace, estimate, fitting_filters, text_size, too_large
from nrlprof.tools.merge.memory_tracks import earliest_us, group_key, memory_counter_tracks
from nrlprof.tools.merge.nsys_tracks import Capture, capture_events, nsys_inputs
from nrlprof.tools.merge.nsys_tracks import estimated_bytes as nsys_estimated_bytes
from nrlprof.tools.merge.rewrite import PID_BLOCK, RayRewriter, TraceRewriter
from nrlprof.tools.merge.select import EVERYTHING, Selection, in_spans, step_spans
from nrlprof.tools.merge.sink import Meter, Segment, Sink
from nrlprof.tools.output import check_output
from nrlprof.tools.progress import ProgressCallback
from nrlprof.tools.read.anatomy import ProfiledProcess, profiled_names
from nrlprof.tools.read.inputs import find_inputs
from nrlprof.tools.read.manifests import load_manifest, manifest_processes
from nrlprof.tools.read.memory import MemoryFile, read_memory_files
from nrlprof.tools.read.pool import usable_cpus
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

NOTHING_TO_MERGE = (
    "nothing to merge: no torch trace, Nsight Systems report or export, memory figures or step-anatomy run found"
)
# A worker process costs ~0.5 s to start; one core merges ~70 MB/s: a second one pays from about 2 x this much input.
_BYTES_PER_JOB = 64 << 20
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
    nsys_captures: list[Path] = field(default_factory=list)  # Nsight Systems reports (or exports) drawn
    nsys_events: int = 0  # their NVTX ranges and GPU activities, and the names of their tracks
    estimated_bytes: int = 0  # of JSON text, estimated before writing
    text_bytes: int = 0  # of JSON text written (inside the gzip, for `.gz`)

    @property
    def events_out(self) -> int:
        return self.events_in + self.events_added

    @property
    def placed_nothing(self) -> bool:
        """Nothing of the inputs is on the timeline: every one skipped, or unplaced."""
        return not (self.merged or self.counter_events or self.nsys_events or self.anatomy_events)

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
            "nsys_captures": [str(p) for p in self.nsys_captures],
            "nsys_events": self.nsys_events,
            "unplaced": [{"path": str(p), "reason": reason} for p, reason in self.unplaced],
            "estimated_bytes": self.estimated_bytes,
            "text_bytes": self.text_bytes,
        }


@dataclass
class MergeInputs:
    """What a merge reads, found here or on the nodes that hold it."""

    traces: list[SizedTrace]
    unreadable: list[tuple[Path, str]] = field(default_factory=list)
    memory_files: list[MemoryFile] = field(default_factory=list)
    anatomy_run: Path | None = None
    captures: list[Capture] = field(default_factory=list)  # Nsight Systems captures, read here
    profiled: list[ProfiledProcess] = field(default_factory=list)  # who wrote profiler files, beside the traces


# Writes the parts of `tasks`, in their order, each once it is in task.part here.
PartMaker = Callable[[list["PartTask"], Meter], Iterable["Part"]]


def merge_traces(
    inputs: list[Path],
    output: Path,
    ray_timeline: Path | None = None,
    progress: ProgressCallback | None = None,
    strict: bool = False,
    jobs: int | None = None,
    compress_level: int = 1,
    selection: Selection = EVERYTHING,
    force: bool = False,
) -> MergeResult:
    """Merge the traces found under `inputs` that `selection` keeps into `output` (gzipped when it ends with `.gz`).

    `jobs`: processes reading traces at once; by default one per CPU, at most one per 64 MiB of input. A
    timeline estimated past the size Perfetto's UI opens raises ToolError naming filters that fit, unless `force`.
    """
    started = time.perf_counter()
    output = Path(output)
    found = find_inputs([Path(p) for p in inputs])  # the one walk of the inputs
    headers, unreadable = read_headers(found.traces, exclude=[output])
    memory_files, memory_unreadable = read_memory_files(found.memory_figures)
    unreadable = [*unreadable, *memory_unreadable]
    if unreadable and strict:
        raise ToolError(unreadable[0][1], unreadable[0][0])
    anatomy = find_anatomy_run(list(inputs), found.anatomy_dirs)
    nsys_found = found.nsys_reports or found.nsys_exports
    if not headers and not unreadable and not memory_files and not nsys_found and anatomy is None:
        raise ToolError(NOTHING_TO_MERGE, ", ".join(map(str, inputs)))
    manifests = [load_manifest(path) for path in found.manifests]
    sized = [SizedTrace(h, text_size(h.path), h.path.stat().st_size) for h in headers]
    with nsys_inputs(found.nsys_reports, found.nsys_exports, shutil.which("nsys"), manifests) as nsys:
        if nsys.skipped and strict:
            raise ToolError(nsys.skipped[0][1], nsys.skipped[0][0])
        merge = MergeInputs(sized, [*unreadable, *nsys.skipped], memory_files, anatomy, nsys.captures,
                            manifest_processes(manifests))  # fmt: skip
        return write_timeline(merge, output, lambda tasks, meter: _parts(tasks, jobs, meter), ray_timeline,
                              progress, strict, compress_level, selection, force, started, jobs)  # fmt: skip


def check_size(merge: MergeInputs, selection: Selection, force: bool, ray_timeline: Path | None) -> int:
    """The timeline's estimated JSON bytes; ToolError past what Perfetto's UI opens, unless `force`."""
    extra = text_size(Path(ray_timeline)) if ray_timeline is not None else 0
    extra += nsys_estimated_bytes([c for c in merge.captures if selection.keeps_process(c.worker, c.rank)])
    estimated = estimate(merge.traces, selection, extra)
    limit = sizes.PERFETTO_UI_LIMIT_BYTES  # read now: tests lower it
    if estimated > limit and not force:
        raise ToolError(too_large(estimated, fitting_filters(merge.traces, selection, limit), limit))
    return estimated


def write_timeline(
    merge: MergeInputs,
    output: Path,
    make_parts: PartMaker,
    ray_timeline: Path | None = None,
    progress: ProgressCallback | None = None,
    strict: bool = False,
    compress_level: int = 1,
    selection: Selection = EVERYTHING,
    force: bool = False,
    started: float | None = None,
    jobs: int | None = None,
) -> MergeResult:
    """The timeline of what `merge` holds, its parts written by `make_parts` (here, or on the nodes)."""
    started = time.perf_counter() if started is None else started
    if ray_timeline is not None and not Path(ray_timeline).is_file():
        raise ToolError("Ray timeline not found", ray_timeline)
    check_output(output)
    estimated = check_size(merge, selection, force, ray_timeline)
    headers = sorted((t.header for t in merge.traces if selection.keeps(t.header)), key=TraceHeader.sort_key)
    memory_files = [f for f in merge.memory_files if selection.keeps_process(f.worker, f.rank)]
    memory_origin_us = earliest_us(memory_files)
    captures = [c for c in merge.captures if selection.keeps_process(c.worker, c.rank)]
    disk = {t.header.path: t.disk_bytes for t in merge.traces}
    result = MergeResult(output, skipped=list(merge.unreadable), estimated_bytes=estimated,
                         jobs=jobs or _default_jobs(sum(disk.values()), headers))  # fmt: skip
    profiled = profiled_names([*merge.profiled, *(t.header.process for t in merge.traces),
                               *((None, c.pid, c.worker, c.rank) for c in merge.captures)])  # fmt: skip
    anatomy = anatomy_trace_events(merge.anatomy_run, profiled) if merge.anatomy_run else []  # µs since the epoch
    origin_ns = min(
        [h.base_time_ns for h in headers]
        + ([int(memory_origin_us * 1000)] if memory_origin_us is not None else [])
        + [c.start_ns for c in captures if c.start_ns],
        default=_earliest_ns(anatomy),
    )
    groups: dict[tuple[Any, ...], int] = {}
    for header in headers:
        groups.setdefault(_group_key(header), len(groups))
    traced_groups = len(groups)
    for memory_file in memory_files:
        groups.setdefault(group_key(memory_file), len(groups))
    memory_groups = {group_key(f) for f in memory_files}
    meter = Meter(progress, sum(disk.values()) + (Path(ray_timeline).stat().st_size if ray_timeline else 0))
    parts_dir = Path(tempfile.mkdtemp(dir=output.parent, prefix=f".{output.name}.parts."))
    sink = Sink(output, compress_level)
    try:
        level = compress_level if sink.compressed else None
        tasks = [
            PartTask(
                h.path,
                i,
                groups[_group_key(h)],
                h.label,
                h.pid,
                (h.base_time_ns - origin_ns) / 1000,
                parts_dir / f"{i}.part",
                level,
                _group_key(h) in memory_groups,
                tuple(selection.chosen(h) or ()),
                disk[h.path],
            )
            for i, h in enumerate(headers)
        ]
        sink.write(_document_head(origin_ns))
        names: dict[int, str] = {}
        step_ends: dict[tuple[Any, ...], dict[int, tuple[float, float]]] = {}
        for part in make_parts(tasks, meter):
            if part.error is not None:
                if strict:
                    raise ToolError(part.error, part.task.path)
                result.skipped.append((part.task.path, part.error))
                continue
            sink.append_part(part.task.part, part.events, part.crc, part.size)
            part.task.part.unlink(missing_ok=True)
            names.update(part.names)
            if part.step_ends:
                step_ends.setdefault(_group_key(headers[part.task.index]), {}).update(part.step_ends)
            result.merged.append(part.task.path)
            result.events_in += part.events
            result.bytes_in += disk[part.task.path]
        counters = memory_counter_tracks(memory_files, origin_ns, groups, traced_groups, step_ends, names)
        result.unplaced.extend(counters.skipped)
        sink.write_events(counters.events)
        result.memory_files, result.counter_events = counters.files, len(counters.events)
        for index, capture in enumerate(captures):
            for batch in capture_events(capture, PID_BLOCK * (len(groups) + 3) + index + 1, origin_ns):
                sink.write_events(batch)
                result.nsys_events += len(batch)
            result.nsys_captures.append(capture.source)
        anatomy_base = PID_BLOCK * (len(groups) + 2)
        for event in anatomy:
            event["pid"] = anatomy_base + int(event.get("pid", 0))
            if "ts" in event:
                event["ts"] = float(event["ts"]) - origin_ns / 1000
        sink.write_events(anatomy)
        result.anatomy_events = len(anatomy)
        if ray_timeline is not None:
            _add_ray_timeline(sink, Path(ray_timeline), origin_ns, PID_BLOCK * (len(groups) + 1), names, result)
        result.processes = dict(sorted(names.items()))
        added = [
            {"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": name}}
            for pid, name in result.processes.items()
        ]
        sink.write_events(added)
        result.events_added = len(added) + result.counter_events + result.nsys_events + result.anatomy_events
        sink.write(_document_tail(result))
        sink.commit()
        result.text_bytes = sink.text_bytes
    except BaseException:
        sink.abort()
        raise
    finally:
        shutil.rmtree(parts_dir, ignore_errors=True)
    result.seconds = time.perf_counter() - started
    meter.finish()
    return result


def _add_ray_timeline(
    sink: Sink, path: Path, origin_ns: int, base_pid: int, names: dict[int, str], result: MergeResult
) -> None:
    ray = RayRewriter(-origin_ns / 1000, base_pid)
    with gc_paused():
        for batch in iter_chrome_events(path):
            try:
                ray.rewrite(batch)
            except _CONTENT_ERRORS as exc:
                check_events(batch, path)
                raise ToolError(unexpected_content(exc), path) from exc
            sink.write_events(batch)
    names.update(ray.names)
    result.events_in += ray.count
    result.bytes_in += path.stat().st_size


def _earliest_ns(events: list[dict[str, Any]]) -> int:
    """The earliest time of spans in µs since the epoch, in ns; 0 when there is none."""
    return int(min((float(e["ts"]) for e in events if "ts" in e), default=0.0) * 1000)


def _default_jobs(total_bytes: int, inputs: list[Any]) -> int:
    return max(1, min(usable_cpus(), len(inputs), total_bytes // _BYTES_PER_JOB))


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
class PartTask:
    """One input and everything needed to rewrite it on its own, in any process (or on its node)."""

    path: Path
    index: int
    group: int
    label: str
    main_pid: int | None
    ts_offset: float
    part: Path
    compress_level: int | None
    collect_steps: bool = False
    steps: tuple[int, ...] = ()  # the steps whose events stay; none: every event
    disk_bytes: int = 0  # of the input, for progress


@dataclass
class Part:
    task: PartTask
    events: int = 0
    names: dict[int, str] = field(default_factory=dict)
    crc: int = 0
    size: int = 0
    error: str | None = None
    step_ends: dict[int, tuple[float, float]] = field(default_factory=dict)


def _parts(tasks: list[PartTask], jobs: int | None, meter: Meter) -> Iterable[Part]:
    """The parts, in task order; with jobs > 1, tasks beyond this process's share go to worker processes."""
    if jobs is None:
        jobs = _default_jobs(sum(t.disk_bytes for t in tasks), tasks)
    if jobs <= 1:
        for task in tasks:
            yield write_part(task, meter.reader())
            meter.done(task.disk_bytes)
        return
    context = multiprocessing.get_context(
        "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"
    )
    with ProcessPoolExecutor(jobs - 1, mp_context=context) as pool:
        futures: dict[int, Future[Part]] = {
            t.index: pool.submit(write_part, t) for t in tasks if t.index % jobs != 0
        }  # fmt: skip
        try:
            for task in tasks:
                part = futures[task.index].result() if task.index in futures else write_part(task, meter.reader())
                meter.done(task.disk_bytes)
                yield part
        finally:
            for future in futures.values():
                future.cancel()


def write_part(task: PartTask, progress: ReadProgress | None = None) -> Part:
    """Rewrite one trace (its chosen steps' events) into its part file; a trace that cannot be read gives a
    part with `error` set."""
    part = Part(task)
    rewriter = TraceRewriter(task)
    try:
        spans = step_spans(task.path, task.steps) if task.steps else None
        with gc_paused(), Segment(task.part, task.compress_level) as segment:
            for batch in iter_event_batches(task.path, progress):
                try:
                    if spans is not None:
                        batch = in_spans(batch, spans)
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
