"""Merge every torch trace of a run (and optionally Ray's timeline) into one Chrome/Perfetto trace.

Streaming, one batch of events at a time, so memory stays bounded whatever the input size:
- timestamps move onto the earliest `baseTimeNanoseconds` of the inputs (kept as the output's);
- processes get new integer pids, one per (host, pid, rank, worker, original pid), named
  `<worker> rank <r> (<host>)` or `controller (<host>)` by `process_name` metadata events;
- flow ids (`id`) and `args.correlation` / `args["External id"]` are shifted per input so they stay
  distinct; string ids get an `<input index>:` prefix;
- every input event is written; the only additions are one `process_name` event per new pid.

Bad inputs: a trace that cannot be read (not JSON, cut short, damaged gzip) is skipped with its reason in
`MergeResult.skipped` and the output holds every other trace; whatever of it was already written is rolled
back. With `strict=True` the first bad trace raises ToolError instead. A missing input, or no readable trace
at all, raises ToolError. The output is written under a temporary name and renamed into place only when
complete; on any error nothing is left at `output`.
"""

from __future__ import annotations

import argparse
import json
import os
import struct
import sys
import tempfile
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from nrlprof.tools.errors import ToolError
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

_ID_ARGS = ("correlation", "External id")


@dataclass
class MergeResult:
    output: Path
    merged: list[Path] = field(default_factory=list)
    skipped: list[tuple[Path, str]] = field(default_factory=list)
    events_in: int = 0
    events_added: int = 0
    bytes_in: int = 0
    seconds: float = 0.0
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
            "processes": {str(pid): name for pid, name in self.processes.items()},
        }


def merge_traces(
    inputs: list[Path],
    output: Path,
    ray_timeline: Path | None = None,
    progress: ProgressCallback | None = None,
    strict: bool = False,
    compress_level: int = 3,
) -> MergeResult:
    """Merge the traces found under `inputs` into `output` (gzipped when it ends with `.gz`)."""
    started = time.perf_counter()
    output = Path(output)
    result = MergeResult(output)
    headers, unreadable = find_traces([Path(p) for p in inputs], exclude=[output])
    if unreadable and strict:
        raise ToolError(unreadable[0][1])
    result.skipped.extend(unreadable)
    if not headers:
        where = ", ".join(str(p) for p in inputs)
        raise ToolError(f"no readable torch trace found{_listing(unreadable)}", where)
    if ray_timeline is not None and not Path(ray_timeline).is_file():
        raise ToolError("Ray timeline not found", ray_timeline)
    headers.sort(key=TraceHeader.sort_key)
    origin_ns = min(h.base_time_ns for h in headers)
    sizes = {h.path: h.path.stat().st_size for h in headers}
    if ray_timeline is not None:
        sizes[Path(ray_timeline)] = Path(ray_timeline).stat().st_size
    total, done = sum(sizes.values()), 0

    def advance(path: Path) -> Callable[[int], None] | None:
        if progress is None:
            return None
        return lambda consumed: progress(done + consumed, total)

    processes = _Processes()
    sink = AtomicSink(output, compress_level)
    try:
        with gc_paused():
            sink.write(_document_head(origin_ns))
            next_id = 0
            for index, header in enumerate(headers):
                point, state = sink.save_point(), processes.snapshot()
                rewriter = _TraceRewriter(header, index, (header.base_time_ns - origin_ns) / 1000, next_id, processes)
                try:
                    for batch in iter_event_batches(header.path, advance(header.path)):
                        rewriter.rewrite(batch)
                        sink.write_events(batch)
                except ToolError as exc:
                    if strict:
                        raise
                    sink.roll_back(point)
                    processes.restore(state)
                    result.skipped.append((header.path, exc.reason))
                else:
                    result.merged.append(header.path)
                    result.events_in += rewriter.count
                    result.bytes_in += sizes[header.path]
                    next_id = max(next_id, rewriter.max_id + 1)
                done += sizes[header.path]
            if not result.merged:
                raise ToolError(f"no readable torch trace{_listing(result.skipped)}")
            if ray_timeline is not None:
                ray = _RayRewriter(Path(ray_timeline), -origin_ns / 1000, processes)
                for batch in iter_chrome_events(Path(ray_timeline)):
                    ray.rewrite(batch)
                    sink.write_events(batch)
                result.events_in += ray.count
                result.bytes_in += sizes[Path(ray_timeline)]
            added = processes.name_events()
            sink.write_events(added)
            result.events_added = len(added)
            sink.write(_document_tail(result))
        sink.commit()
    except BaseException:
        sink.abort()
        raise
    result.processes = dict(processes.names)
    result.seconds = time.perf_counter() - started
    if progress is not None:
        progress(total, total)
    return result


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


class _Processes:
    """New integer pids for (input group, original pid), and their display names."""

    def __init__(self) -> None:
        self.pids: dict[tuple[Any, ...], int] = {}
        self.names: dict[int, str] = {}

    def allocate(self, key: tuple[Any, ...], name: str) -> int:
        pid = self.pids.get(key)
        if pid is None:
            pid = self.pids[key] = len(self.pids) + 1
            self.names[pid] = name
        return pid

    def snapshot(self) -> tuple[dict[tuple[Any, ...], int], dict[int, str]]:
        return dict(self.pids), dict(self.names)

    def restore(self, state: tuple[dict[tuple[Any, ...], int], dict[int, str]]) -> None:
        self.pids, self.names = dict(state[0]), dict(state[1])

    def name_events(self) -> list[dict[str, Any]]:
        return [
            {"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": name}}
            for pid, name in self.names.items()
        ]


def _hashable(value: Any) -> Any:
    return value if isinstance(value, (int, str, float, type(None))) else json.dumps(value, sort_keys=True)


class _TraceRewriter:
    """Rewrites one torch trace's events in place: pid, ts, ids; counts them and tracks the largest id."""

    def __init__(self, header: TraceHeader, index: int, ts_offset: float, id_offset: int, processes: _Processes):
        self.group = (header.host, header.pid, header.rank, header.worker)
        self.label = header.label
        self.main_pid = header.pid
        self.ts_offset = ts_offset
        self.id_offset = id_offset
        self.id_prefix = f"{index}:"
        self.processes = processes
        self.pid_map: dict[Any, int] = {}
        self.count = 0
        self.top_id = -1

    @property
    def max_id(self) -> int:
        """The largest id written, after shifting."""
        return self.top_id + self.id_offset

    def _pid(self, original: Any) -> int:
        key = _hashable(original)
        if self.main_pid is None and isinstance(key, int):
            self.main_pid = key
        name = self.label if key == self.main_pid else f"{self.label} [{key if key != '' else 'no pid'}]"
        pid = self.processes.allocate((*self.group, key), name)
        if key is original:
            self.pid_map[key] = pid
        return pid

    def _shift(self, value: Any) -> Any:
        if isinstance(value, int):
            self.top_id = max(self.top_id, value)
            return value + self.id_offset
        if isinstance(value, str):
            return self.id_prefix + value
        return value

    def rewrite(self, events: list[dict[str, Any]]) -> None:
        # The hot loop of a merge: plain ints take the inline path, anything else goes through _shift.
        pid_map, ts_offset, offset, top = self.pid_map, self.ts_offset, self.id_offset, self.top_id
        shift = self._shift
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
            if "id" in event:
                event["id"] = shift(event["id"])
            args = event.get("args")
            if args.__class__ is not dict:
                continue
            value = args.get("External id")
            if value is not None:
                if value.__class__ is int:
                    args["External id"] = value + offset
                    if value > top:
                        top = value
                else:
                    args["External id"] = shift(value)
            value = args.get("correlation")
            if value is not None:
                if value.__class__ is int:
                    args["correlation"] = value + offset
                    if value > top:
                        top = value
                else:
                    args["correlation"] = shift(value)
            if event.get("ph") == "M":
                self._metadata(event, args)
        self.top_id = max(self.top_id, top)
        self.count += len(events)

    def _metadata(self, event: dict[str, Any], args: dict[str, Any]) -> None:
        if event.get("name") == "process_name" and "pid" in event:
            args["name"] = self.processes.names.get(event["pid"], args.get("name"))
        elif event.get("name") == "process_sort_index" and "pid" in event:
            args["sort_index"] = event["pid"]


class _RayRewriter:
    """Ray's timeline: epoch-microsecond timestamps onto the merged origin, its nodes as processes."""

    def __init__(self, path: Path, ts_offset: float, processes: _Processes) -> None:
        self.path = path
        self.ts_offset = ts_offset
        self.processes = processes
        self.count = 0

    def rewrite(self, events: list[dict[str, Any]]) -> None:
        for event in events:
            if "pid" in event:
                original = _hashable(event["pid"])
                event["pid"] = self.processes.allocate(("ray", original), f"ray [{original}]")
            ts = event.get("ts")
            if isinstance(ts, (int, float)):
                event["ts"] = ts + self.ts_offset
            args = event.get("args")
            if event.get("ph") == "M" and event.get("name") == "process_name" and isinstance(args, dict):
                args["name"] = self.processes.names[event["pid"]] = f"ray: {args.get('name', '')}"
        self.count += len(events)


@dataclass(frozen=True)
class SavePoint:
    offset: int
    crc: int
    size: int
    events: int


class AtomicSink:
    """Bytes to `path` under a temporary name in the same directory, renamed into place by `commit()`.

    A `.gz` output is one gzip member whose deflate stream is fully flushed at each save point, so the bytes
    up to there stand on their own: rolling back truncates the file and starts a fresh compressor.
    """

    def __init__(self, path: Path, compress_level: int = 3) -> None:
        self.path = path
        self.compressed = path.name.endswith(".gz")
        self._level = compress_level
        if not path.parent.is_dir():
            raise ToolError("output directory does not exist", path.parent)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        self._tmp = Path(tmp)
        self._file: BinaryIO = os.fdopen(fd, "wb", buffering=1 << 20)
        self._crc = 0
        self._size = 0
        self._events = 0
        self._deflate = self._new_deflate()
        if self.compressed:
            self._file.write(b"\x1f\x8b\x08\x00" + struct.pack("<I", int(time.time())) + b"\x00\xff")

    def _new_deflate(self) -> Any:
        return zlib.compressobj(self._level, zlib.DEFLATED, -zlib.MAX_WBITS) if self.compressed else None

    def write(self, data: bytes) -> None:
        if self._deflate is None:
            self._file.write(data)
            return
        self._crc = zlib.crc32(data, self._crc)
        self._size += len(data)
        self._file.write(self._deflate.compress(data))

    def write_events(self, events: list[dict[str, Any]]) -> None:
        """Events after those already written, one per line."""
        if not events:
            return
        try:
            text = orjson.dumps(events)[1:-1]
        except TypeError:  # an integer beyond 64 bits, which orjson refuses
            text = json.dumps(events, separators=(",", ":")).encode()[1:-1]
        # `},{"` cannot occur inside a JSON string (quotes there are escaped): a newline there is whitespace.
        text = text.replace(b'},{"', b'},\n{"')
        self.write(b",\n" + text if self._events else text)
        self._events += len(events)

    def save_point(self) -> SavePoint:
        if self._deflate is not None:
            self._file.write(self._deflate.flush(zlib.Z_FULL_FLUSH))
        return SavePoint(self._file.tell(), self._crc, self._size, self._events)

    def roll_back(self, point: SavePoint) -> None:
        self._file.seek(point.offset)
        self._file.truncate()
        self._crc, self._size, self._events = point.crc, point.size, point.events
        self._deflate = self._new_deflate()

    def commit(self) -> None:
        if self._deflate is not None:
            self._file.write(self._deflate.flush(zlib.Z_FINISH))
            self._file.write(struct.pack("<II", self._crc & 0xFFFFFFFF, self._size & 0xFFFFFFFF))
        self._file.close()
        os.replace(self._tmp, self.path)

    def abort(self) -> None:
        self._file.close()
        self._tmp.unlink(missing_ok=True)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("inputs", nargs="+", type=Path, help="trace files or directories (searched recursively)")
    parser.add_argument("-o", "--output", type=Path, default=Path("timeline.json.gz"),
                        help="merged trace; gzipped when it ends with .gz (default: %(default)s)")  # fmt: skip
    parser.add_argument("--ray-timeline", type=Path, default=None, help="a ray.timeline() JSON file to add")
    parser.add_argument("--strict", action="store_true", help="fail on the first unreadable trace")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")


def run(args: argparse.Namespace) -> int:
    """0: all merged; 1: merged, some traces skipped; 2: bad input, nothing written."""
    try:
        with progress_bar("merging traces") as progress:
            result = merge_traces(args.inputs, args.output, args.ray_timeline, progress, args.strict)
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
