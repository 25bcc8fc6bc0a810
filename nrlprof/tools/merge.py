"""Merge every torch trace of a run (and optionally Ray's timeline) into one Chrome/Perfetto trace.

Streaming, one batch of events at a time, so memory stays bounded whatever the input size:
- timestamps move onto the earliest `baseTimeNanoseconds` of the inputs (kept as the output's);
- processes get new integer pids, one per (host, pid, rank, worker, original pid), named
  `<worker> rank <r> (<host>)` or `controller (<host>)` by `process_name` metadata events;
- flow ids (`id`) and `args.correlation` / `args["External id"]` of the i-th input move up by i * 2**40 so
  they stay distinct; ids that are not integers in [0, 2**40) become strings prefixed `<i>:`;
- every input event is written; the only additions are one `process_name` event per new pid.

Each input becomes a "part" (its rewritten events, gzip-compressed when the output is) in a temporary
directory beside the output, then parts are appended in order. Pids and ids depend only on the input's
place in the sorted list, so parts can be written by several processes at once (`jobs`).

Bad inputs: a trace that cannot be read (not JSON, cut short, damaged gzip) is skipped with its reason in
`MergeResult.skipped`, its part dropped, and the output holds every other trace. With `strict=True` the
first bad trace raises ToolError instead. A missing input, or no readable trace at all, raises ToolError.
The output is written under a temporary name and renamed into place only when complete; on any error
nothing is left at `output`.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import shutil
import struct
import sys
import tempfile
import time
import zlib
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from nrlprof.errors import ToolError
from nrlprof.tools.traces import (
    TraceHeader,
    find_traces,
    gc_paused,
    iter_chrome_events,
    iter_event_batches,
    progress_bar,
)

ProgressCallback = Callable[[int, int], None]
"""Called with (bytes read, total bytes) of the inputs on disk."""

ID_STRIDE = 1 << 40
PID_BLOCK = 100_000
_KNOWN_PIDS = {"Spans": 1001, "Traces": 1002, "": 1003}  # the string pids kineto writes
_BYTES_PER_JOB = 256 << 20  # a worker process costs ~0.5 s to start: worth it past this much input


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
    headers, unreadable = find_traces([Path(p) for p in inputs], exclude=[output])
    if unreadable and strict:
        raise ToolError(unreadable[0][1], unreadable[0][0])
    if not headers:
        raise ToolError(f"no readable torch trace found{_listing(unreadable)}", ", ".join(map(str, inputs)))
    if ray_timeline is not None and not Path(ray_timeline).is_file():
        raise ToolError("Ray timeline not found", ray_timeline)
    if not output.parent.is_dir():
        raise ToolError("output directory does not exist", output.parent)
    headers.sort(key=TraceHeader.sort_key)
    sizes = {h.path: h.path.stat().st_size for h in headers}
    result = MergeResult(output, skipped=list(unreadable), jobs=jobs or _default_jobs(sum(sizes.values()), headers))
    origin_ns = min(h.base_time_ns for h in headers)
    groups: dict[tuple[Any, ...], int] = {}
    for header in headers:
        groups.setdefault(_group_key(header), len(groups))
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
            )
            for i, h in enumerate(headers)
        ]
        sink.write(_document_head(origin_ns))
        names: dict[int, str] = {}
        for part in _parts(tasks, result.jobs, meter):
            if part.error is not None:
                if strict:
                    raise ToolError(part.error, part.task.path)
                result.skipped.append((part.task.path, part.error))
                continue
            sink.append_part(part)
            part.task.part.unlink()
            names.update(part.names)
            result.merged.append(part.task.path)
            result.events_in += part.events
            result.bytes_in += sizes[part.task.path]
        if not result.merged:
            raise ToolError(f"no readable torch trace{_listing(result.skipped)}")
        if ray_timeline is not None:
            ray = _RayRewriter(-origin_ns / 1000, PID_BLOCK * (len(groups) + 1))
            with gc_paused():
                for batch in iter_chrome_events(Path(ray_timeline)):
                    ray.rewrite(batch)
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
        result.events_added = len(added)
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


def _listing(skipped: list[tuple[Path, str]]) -> str:
    return "".join(f"; {path}: {reason}" for path, reason in skipped)


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


@dataclass
class _Part:
    task: _Task
    events: int = 0
    names: dict[int, str] = field(default_factory=dict)
    crc: int = 0
    size: int = 0
    error: str | None = None


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


def _write_part(task: _Task, progress: Callable[[int], None] | None = None) -> _Part:
    """Rewrite one trace into its part file; a trace that cannot be read gives a part with `error` set."""
    part = _Part(task)
    rewriter = _TraceRewriter(task)
    try:
        with gc_paused(), _Segment(task.part, task.compress_level) as segment:
            for batch in iter_event_batches(task.path, progress):
                rewriter.rewrite(batch)
                segment.write_events(batch)
        part.crc, part.size = segment.crc, segment.size
    except ToolError as exc:
        task.part.unlink(missing_ok=True)
        part.error = exc.reason
    part.events, part.names = rewriter.count, rewriter.names
    return part


def _pid_slot(original: Any, main_pid: int | None) -> int:
    """Where an original pid goes in its input's block of PID_BLOCK pids: the same in every process."""
    if original == main_pid:
        return 0
    if isinstance(original, int) and 0 <= original < 1000:  # kineto's GPU rows: pid = device index
        return 1 + original
    if isinstance(original, str) and original in _KNOWN_PIDS:
        return _KNOWN_PIDS[original]
    return 1100 + zlib.crc32(repr(original).encode()) % (PID_BLOCK - 1100)


def _hashable(value: Any) -> Any:
    return value if isinstance(value, (int, str, float, type(None))) else json.dumps(value, sort_keys=True)


class _TraceRewriter:
    """Rewrites one torch trace's events in place: pid, ts, ids; counts them; names the new pids."""

    def __init__(self, task: _Task) -> None:
        self.base_pid = PID_BLOCK * (task.group + 1)
        self.label = task.label
        self.main_pid = task.main_pid
        self.ts_offset = task.ts_offset
        self.id_offset = task.index * ID_STRIDE
        self.id_prefix = f"{task.index}:"
        self.pid_map: dict[Any, int] = {}
        self.names: dict[int, str] = {}
        self.count = 0

    def _pid(self, original: Any) -> int:
        key = _hashable(original)
        if self.main_pid is None and isinstance(key, int):
            self.main_pid = key
        pid = self.base_pid + _pid_slot(key, self.main_pid)
        self.names[pid] = self.label if pid == self.base_pid else f"{self.label} [{key if key != '' else 'no pid'}]"
        if key is original:
            self.pid_map[key] = pid
        return pid

    def _shift(self, value: Any) -> Any:
        if value.__class__ is int and 0 <= value < ID_STRIDE:
            return value + self.id_offset
        return value if value is None else self.id_prefix + str(value)

    def rewrite(self, events: list[dict[str, Any]]) -> None:
        # The hot loop of a merge: plain small ints take the inline path, anything else goes through _shift.
        pid_map, ts_offset, offset, shift = self.pid_map, self.ts_offset, self.id_offset, self._shift
        for event in events:
            try:
                event["pid"] = pid_map[event["pid"]]
            except (KeyError, TypeError):
                if "pid" in event:
                    event["pid"] = self._pid(event["pid"])
            if ts_offset:
                ts = event.get("ts")
                if ts.__class__ is float or ts.__class__ is int:
                    event["ts"] = ts + ts_offset
            args = event.get("args")
            if args.__class__ is not dict:
                if "id" in event:
                    value = event["id"]
                    event["id"] = value + offset if value.__class__ is int and 0 <= value < ID_STRIDE else shift(value)
                continue
            value = args.get("External id")
            if value is not None:
                args["External id"] = (
                    value + offset if value.__class__ is int and 0 <= value < ID_STRIDE else shift(value)
                )
            value = args.get("correlation")
            if value is not None:
                args["correlation"] = (
                    value + offset if value.__class__ is int and 0 <= value < ID_STRIDE else shift(value)
                )
            if "id" in event:
                event["id"] = shift(event["id"])
            if event.get("ph") == "M":
                self._metadata(event, args)
        self.count += len(events)

    def _metadata(self, event: dict[str, Any], args: dict[str, Any]) -> None:
        if "pid" not in event:
            return
        if event.get("name") == "process_name":
            args["name"] = self.names.get(event["pid"], self.label)
        elif event.get("name") == "process_sort_index":
            args["sort_index"] = event["pid"]


class _RayRewriter:
    """Ray's timeline: epoch-microsecond timestamps onto the merged origin, its nodes as processes."""

    def __init__(self, ts_offset: float, base_pid: int) -> None:
        self.ts_offset = ts_offset
        self.base_pid = base_pid
        self.names: dict[int, str] = {}
        self.count = 0

    def rewrite(self, events: list[dict[str, Any]]) -> None:
        for event in events:
            if "pid" in event:
                original = _hashable(event["pid"])
                pid = event["pid"] = self.base_pid + _pid_slot(original, None)
                self.names.setdefault(pid, f"ray [{original}]")
            ts = event.get("ts")
            if isinstance(ts, (int, float)):
                event["ts"] = ts + self.ts_offset
            args = event.get("args")
            if event.get("ph") == "M" and event.get("name") == "process_name" and isinstance(args, dict):
                args["name"] = self.names[event["pid"]] = f"ray: {args.get('name', '')}"
        self.count += len(events)


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
        self._deflate = zlib.compressobj(compress_level, zlib.DEFLATED, -zlib.MAX_WBITS) if compress_level else None
        self.crc = 0
        self.size = 0
        self.events = 0

    def write_events(self, events: list[dict[str, Any]]) -> None:
        if not events:
            return
        data = _event_text(events, first=not self.events)
        self.events += len(events)
        if self._deflate is None:
            self._file.write(data)
            return
        self.crc = zlib.crc32(data, self.crc)
        self.size += len(data)
        self._file.write(self._deflate.compress(data))

    def __enter__(self) -> _Segment:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._deflate is not None and exc[0] is None:
            self._file.write(self._deflate.flush(zlib.Z_FULL_FLUSH))
        self._file.close()


class _Sink:
    """The output under a temporary name in its directory, renamed into place by `commit()`.

    A `.gz` output is one gzip member. Its deflate stream is this object's own output, fully flushed
    wherever a part is spliced in (each part ends in a full flush too, so every piece stands on its own),
    and its CRC is combined from the pieces'.
    """

    def __init__(self, path: Path, compress_level: int) -> None:
        self.path = path
        self.compressed = path.name.endswith(".gz")
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        self._tmp = Path(tmp)
        self._file: BinaryIO = os.fdopen(fd, "wb", buffering=1 << 20)
        self._deflate = zlib.compressobj(compress_level, zlib.DEFLATED, -zlib.MAX_WBITS) if self.compressed else None
        self._crc = 0
        self._size = 0
        self._events = 0
        if self.compressed:
            self._file.write(b"\x1f\x8b\x08\x00" + struct.pack("<I", int(time.time())) + b"\x00\xff")

    def write_events(self, events: list[dict[str, Any]]) -> None:
        if events:
            self.write(_event_text(events, first=not self._events))
            self._events += len(events)

    def write(self, data: bytes) -> None:
        if self._deflate is None:
            self._file.write(data)
            return
        self._crc = zlib.crc32(data, self._crc)
        self._size += len(data)
        self._file.write(self._deflate.compress(data))

    def append_part(self, part: _Part) -> None:
        if not part.events:
            return
        if self._events:
            self.write(b",\n")
        self._events += part.events
        if self._deflate is not None:
            self._file.write(self._deflate.flush(zlib.Z_FULL_FLUSH))
            self._crc = crc32_combine(self._crc, part.crc, part.size)
            self._size += part.size
        with open(part.task.part, "rb") as source:
            shutil.copyfileobj(source, self._file, 1 << 20)

    def commit(self) -> None:
        if self._deflate is not None:
            self._file.write(self._deflate.flush(zlib.Z_FINISH))
            self._file.write(struct.pack("<II", self._crc, self._size & 0xFFFFFFFF))
        self._file.close()
        os.replace(self._tmp, self.path)

    def abort(self) -> None:
        self._file.close()
        self._tmp.unlink(missing_ok=True)


def crc32_combine(crc1: int, crc2: int, length2: int) -> int:
    """The CRC-32 of A + B from crc32(A), crc32(B) and len(B): zlib's crc32_combine, which Python lacks."""

    def times(matrix: list[int], vector: int) -> int:
        total, i = 0, 0
        while vector:
            if vector & 1:
                total ^= matrix[i]
            vector >>= 1
            i += 1
        return total

    def square(matrix: list[int]) -> list[int]:
        return [times(matrix, row) for row in matrix]

    if length2 <= 0:
        return crc1
    odd = [0xEDB88320] + [1 << n for n in range(31)]  # the operator for one zero bit
    even = square(odd)  # two zero bits
    odd = square(even)  # four zero bits
    while True:
        even = square(odd)
        if length2 & 1:
            crc1 = times(even, crc1)
        length2 >>= 1
        if not length2:
            break
        odd = square(even)
        if length2 & 1:
            crc1 = times(odd, crc1)
        length2 >>= 1
        if not length2:
            break
    return crc1 ^ crc2


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


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("inputs", nargs="+", type=Path, help="trace files or directories (searched recursively)")
    parser.add_argument("-o", "--output", type=Path, default=Path("timeline.json.gz"),
                        help="merged trace; gzipped when it ends with .gz (default: %(default)s)")  # fmt: skip
    parser.add_argument("--ray-timeline", type=Path, default=None, help="a ray.timeline() JSON file to add")
    parser.add_argument("--strict", action="store_true", help="fail on the first unreadable trace")
    parser.add_argument("-j", "--jobs", type=int, default=None,
                        help="processes reading traces (default: one per CPU, at most one per 256 MiB)")  # fmt: skip
    parser.add_argument("--json", action="store_true", help="print the result as JSON")


def run(args: argparse.Namespace) -> int:
    """0: all merged; 1: merged, some traces skipped; 2: bad input, nothing written."""
    try:
        with progress_bar("merging traces") as progress:
            result = merge_traces(
                args.inputs, args.output, args.ray_timeline, progress, args.strict, getattr(args, "jobs", None)
            )
    except ToolError as exc:
        print(f"nrlprof merge: error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        sys.stdout.write(json.dumps(result.to_json(), indent=2) + "\n")
    else:
        mb = result.bytes_in / 1e6
        print(
            f"merged {len(result.merged)} trace(s), {result.events_out} events, {mb:.1f} MB "
            f"in {result.seconds:.1f} s -> {result.output}"
        )
    for path, reason in result.skipped:
        print(f"nrlprof merge: warning: skipped {path}: {reason}", file=sys.stderr)
    return 1 if result.skipped else 0
