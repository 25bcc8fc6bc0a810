"""Chrome trace files (found by tools.read.inputs) read in bounded memory: header metadata, then events in batches.

Torch (kineto) writes every top-level key except `traceName` before `traceEvents`, so the header is the
keys that come before `traceEvents`; reading it stops there. Events are read in batches of about 64 KiB of
text: kineto puts each event's closing brace alone on a line, at the events' indentation, so the text
splits there and orjson (or the caller's decoder: summary's keeps only the fields it reads) parses each
slice. A slice that does not parse (another writer's layout, a cut file) hands over to ijson, which
re-reads the file, skips what was already given and names the problem; before it builds items, a
constant-memory pass refuses JSON nested deeper than MAX_DEPTH.
"""

from __future__ import annotations

import contextlib
import gc
import gzip
import re
import zlib
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import cached_property
from itertools import accumulate, islice
from operator import itemgetter
from pathlib import Path
from typing import Any, BinaryIO

import ijson
import orjson

from nrlprof.errors import ToolError
from nrlprof.layout import CONTROLLER, TRACE_SUFFIXES, TraceName, parse_trace_name
from nrlprof.tools.read.inputs import find_inputs

# Kineto's events nest 5 or 6 deep; the fallback parser's memory grows with the square of the depth.
MAX_DEPTH = 128
EMPTY = "empty file, not a Chrome trace"  # no byte, or white space only (a gzip member of nothing too)

_CHUNK = 1 << 16  # small batches stay in the CPU caches: faster than large ones, and less memory
_HEADER_LIMIT = 64 << 20
_IJSON_BATCH = 2000
# ijson holds every event of a buffer at once: small buffers bound that for a file of brackets
_SCAN_BUFFER = 16 << 10
_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
# A key split across reads starts this close to the end of what was searched (a longer gap inside it: ijson reads)
_KEY_OVERLAP = 64
_DEPTH_CHANGE = defaultdict(int, {"start_map": 1, "start_array": 1, "end_map": -1, "end_array": -1})

try:
    _ijson = ijson.get_backend("yajl2_c")
except ImportError:  # pragma: no cover - the C backend ships in ijson's wheels
    _ijson = ijson

# Called with the bytes of one file read so far on disk (merge and summary turn it into their progress).
ReadProgress = Callable[[int], None]
# The items of a JSON array's text; raises ValueError (orjson.JSONDecodeError is one) when it is not JSON.
DecodeEvents = Callable[[bytes], list[Any]]


def _is_trace_name(name: str) -> bool:
    return name.endswith(TRACE_SUFFIXES)


class TraceReader:
    """A trace file opened for binary reading, gunzipped when it starts with the gzip magic."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self._raw: BinaryIO = open(path, "rb")  # noqa: SIM115 - closed by close()
        except OSError as exc:
            raise ToolError(f"cannot open: {exc.strerror or exc}", path) from exc
        self.compressed = self._raw.read(2) == b"\x1f\x8b"
        self._raw.seek(0)
        self._stream: BinaryIO = gzip.GzipFile(fileobj=self._raw, mode="rb") if self.compressed else self._raw
        self.blank = True  # nothing but white space read so far (an empty gzip member included)

    def read(self, size: int = -1) -> bytes:
        try:
            chunk = self._stream.read(size)
        except (OSError, EOFError, zlib.error) as exc:
            raise ToolError(f"damaged gzip data ({exc})", self.path) from exc
        if self.blank and chunk.strip():
            self.blank = False
        return chunk

    @property
    def consumed(self) -> int:
        """Bytes of the file on disk read so far."""
        return self._raw.tell()

    def close(self) -> None:
        if self._stream is not self._raw:
            self._stream.close()
        self._raw.close()

    def __enter__(self) -> TraceReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass
class TraceHeader:
    """The top-level keys before `traceEvents`, and what nrlprof can tell from them and the file name."""

    path: Path
    metadata: dict[str, Any] = field(default_factory=dict)
    has_events: bool = False

    @property
    def nrlprof(self) -> dict[str, Any]:
        block = self.metadata.get("nrlprof")
        return block if isinstance(block, dict) else {}

    @cached_property
    def _name(self) -> TraceName | None:
        return parse_trace_name(self.path.name)

    def problem(self) -> str | None:
        """Why the nrlprof block cannot be trusted (a value of the wrong type), or None when it can."""
        block = self.nrlprof
        for key, kinds in (("worker", (str,)), ("window", (str,)), ("host", (str,))):
            if block.get(key) is not None and not isinstance(block[key], kinds):
                return f"nrlprof.{key} is {block[key]!r}, expected a string"
        for key in ("rank", "pid"):
            if block.get(key) is not None and not is_int(block[key]):
                return f"nrlprof.{key} is {block[key]!r}, expected an integer"
        steps = block.get("steps")
        if steps is not None and not (isinstance(steps, list) and all(map(is_int, steps))):
            return f"nrlprof.steps is {_short_repr(steps)}, expected a list of integers"
        return None

    @property
    def worker(self) -> str:
        worker = self.nrlprof.get("worker") or (self._name.worker if self._name else None)
        return str(worker) if worker else self.path.name.split(".")[0]

    @property
    def rank(self) -> int | None:
        info = self.metadata.get("distributedInfo")
        for value in (
            self.nrlprof.get("rank"),
            info.get("rank") if isinstance(info, dict) and not self.is_controller else None,
            self._name.rank if self._name else None,
        ):
            if is_int(value):
                return int(value)
        return None

    @property
    def is_controller(self) -> bool:
        return (self.nrlprof.get("worker") or (self._name.worker if self._name else None)) == CONTROLLER

    @property
    def host(self) -> str:
        return str(self.nrlprof.get("host") or self.metadata.get("host_name") or "?")

    @property
    def pid(self) -> int | None:
        value = self.nrlprof.get("pid")
        if is_int(value):
            return int(value)
        return self._name.pid if self._name else None

    @property
    def steps(self) -> list[int]:
        steps = self.nrlprof.get("steps")
        return [int(s) for s in steps] if isinstance(steps, list) and all(map(is_int, steps)) else []

    @property
    def window(self) -> str:
        return str(self.nrlprof.get("window") or (self._name.window if self._name else "") or "")

    @property
    def base_time_ns(self) -> int:
        value = self.metadata.get("baseTimeNanoseconds")
        return int(value) if isinstance(value, (int, float)) and value == value and abs(value) < 1e30 else 0

    @property
    def process(self) -> tuple[str, int | None, str, int | None]:
        """(host, pid, worker, rank) of the process that wrote the trace (read.anatomy.ProfiledProcess); the
        controller has no rank."""
        return (self.host, self.pid, self.worker, None if self.is_controller else self.rank)

    @property
    def is_merged(self) -> bool:
        return bool(self.nrlprof.get("merged"))

    @property
    def label(self) -> str:
        """`<worker> rank <r> (<host>)`, `controller (<host>)`."""
        if self.is_controller:
            return f"controller ({self.host})"
        rank = self.rank
        return f"{self.worker} rank {rank} ({self.host})" if rank is not None else f"{self.worker} ({self.host})"

    def sort_key(self) -> tuple:
        return (not self.is_controller, self.worker, self.rank if self.rank is not None else -1, self.host,
                self.pid or 0, self.steps[:1], self.path.name)  # fmt: skip


def is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: Any) -> bool:
    """An int or float (not a bool), neither NaN nor of magnitude 1e18 or more."""
    return value.__class__ in (int, float) and value == value and abs(value) < 1e18


def _short_repr(value: object, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def read_header(path: Path) -> TraceHeader:
    """The top-level keys before `traceEvents`, without reading the events."""
    header = TraceHeader(path)
    if path.is_file() and path.stat().st_size == 0:
        raise ToolError(EMPTY, path)
    with TraceReader(path) as reader:
        # basic_parse: parse's per-level prefixes grow with the square of the depth within each buffer
        events = _ijson.basic_parse(reader, use_float=True, buf_size=_SCAN_BUFFER)
        try:
            event, _ = next(events)
            if event != "start_map":
                raise ToolError("not a Chrome trace: the top level is not a JSON object", path)
            key: str | None = None
            builder: ijson.ObjectBuilder | None = None
            depth = 0
            for event, value in events:
                if reader.consumed > _HEADER_LIMIT:
                    raise ToolError(f"not a Chrome trace: no traceEvents in the first {_HEADER_LIMIT >> 20} MiB", path)
                if key is None:
                    if event == "end_map":
                        break
                    key = value
                    if key == "traceEvents":
                        if next(events, (None, None))[0] != "start_array":
                            raise ToolError("not a Chrome trace: traceEvents is not a list", path)
                        header.has_events = True
                        break
                    builder, depth = ijson.ObjectBuilder(), 0
                    continue
                builder.event(event, value)
                if event in ("start_map", "start_array"):
                    depth += 1
                    if depth >= MAX_DEPTH:
                        raise ToolError(_too_deep(), path)
                elif event in ("end_map", "end_array"):
                    depth -= 1
                if depth == 0:
                    header.metadata[key] = builder.value
                    key = None
        except StopIteration:
            raise ToolError(EMPTY, path) from None
        except ijson.JSONError as exc:
            if reader.blank:
                raise ToolError(EMPTY, path) from None
            raise ToolError(f"not valid JSON, or cut short ({_first_line(exc)})", path) from exc
    return header


def iter_event_batches(
    path: Path, progress: ReadProgress | None = None, decode: DecodeEvents | None = None
) -> Iterator[list[Any]]:
    """The items of `traceEvents`, in file order, a list at a time; `progress` gets bytes read on disk.

    Items are dicts (orjson's), or what `decode` makes of a slice of kineto-laid-out text (a JSON array
    of events); from text `decode` refuses, or laid out otherwise, ijson reads dicts.
    """
    given = 0
    with TraceReader(path) as reader:
        try:
            for batch in _split_batches(reader, decode):
                given += len(batch)
                if progress is not None:
                    progress(reader.consumed)
                yield batch
            return
        except _LayoutMismatch:
            pass
    yield from _ijson_batches(path, "traceEvents.item", skip=given, progress=progress)


def iter_chrome_events(path: Path) -> Iterator[list[dict[str, Any]]]:
    """Events of any Chrome trace: a JSON list of events (Ray's timeline) or an object with `traceEvents`."""
    with TraceReader(path) as reader:
        start = reader.read(4096).lstrip()[:1]
    if start == b"[":
        yield from _ijson_batches(path, "item")
    elif start == b"{":
        yield from iter_event_batches(path)
    else:
        raise ToolError("not a Chrome trace: expected a JSON list or object", path)


def _first_line(exc: Exception) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


class _LayoutMismatch(Exception):
    """The text is not laid out as kineto writes it (or is cut short): read it with ijson instead."""


def _split_batches(reader: TraceReader, decode: DecodeEvents | None = None) -> Iterator[list[Any]]:
    header = bytearray()  # grown in place and searched only where new text can complete the key: linear
    searched = 0
    while (match := _EVENTS_KEY.search(header, max(0, searched - _KEY_OVERLAP))) is None:
        searched = len(header)
        chunk = reader.read(_CHUNK)
        if not chunk or searched > _HEADER_LIMIT:
            raise _LayoutMismatch
        header += chunk
    buf = bytes(header[match.end() :])
    while not buf.strip():
        chunk = reader.read(_CHUNK)
        if not chunk:
            raise _LayoutMismatch
        buf += chunk
    body = buf.lstrip()
    if body[:1] == b"{":
        space = buf[: len(buf) - len(body)]
        newline = space.rfind(b"\n")
        indent = space[newline + 1 :]
        if newline < 0 or indent.strip(b" \t"):
            raise _LayoutMismatch
        yield from _split_body(reader, body, b"\n" + indent + b"}", decode)
    else:
        _check_trailer(reader, body)


def _split_body(
    reader: TraceReader, buf: bytes, marker: bytes, decode: DecodeEvents | None = None
) -> Iterator[list[Any]]:
    decode = decode or orjson.loads
    eof = False
    separated = False  # whether a comma must come before the next event: not before the first one
    while True:
        if len(buf) >= _CHUNK or eof:
            cut = buf.rfind(marker)
            if cut >= 0:
                end = cut + len(marker)
                text = buf[:end]
                if separated:
                    text = text.lstrip()
                    if text[:1] != b",":
                        raise _LayoutMismatch
                    text = text[1:]
                try:
                    events = decode(b"[" + text + b"]")
                except ValueError:
                    raise _LayoutMismatch from None
                buf, separated = buf[end:], True
                yield events
                continue
            if eof:
                break
        chunk = reader.read(_CHUNK)
        if chunk:
            buf += chunk
        else:
            eof = True
            if buf.lstrip()[:1] == b"]":
                break
    _check_trailer(reader, buf.lstrip())


def _check_trailer(reader: TraceReader, buf: bytes) -> None:
    """What follows the events must close the array and the top-level object."""
    rest = buf + reader.read()
    if rest[:1] != b"]":
        raise _LayoutMismatch
    rest = rest[1:].strip()
    if rest == b"}":
        return
    try:
        if rest[:1] == b"," and isinstance(orjson.loads(b"{" + rest[1:]), dict):
            return
    except orjson.JSONDecodeError:
        pass
    raise _LayoutMismatch


def _ijson_batches(
    path: Path, prefix: str, skip: int = 0, progress: ReadProgress | None = None
) -> Iterator[list[dict[str, Any]]]:
    _check_depth(path)
    count = skip
    with TraceReader(path) as reader:
        items = islice(_ijson.items(reader, prefix, use_float=True), skip, None)
        try:
            while batch := list(islice(items, _IJSON_BATCH)):
                count += len(batch)
                if progress is not None:
                    progress(reader.consumed)
                yield batch
        except ijson.JSONError as exc:
            raise ToolError(f"not valid JSON, or cut short, after {count} events ({_first_line(exc)})", path) from exc


def _check_depth(path: Path) -> None:
    """Refuse JSON nested deeper than MAX_DEPTH before ijson builds items (its memory grows with depth squared).

    basic_parse keeps no per-level state, so this pass runs in constant memory; it costs about as much
    time as the pass that builds the items, and only files not laid out as kineto writes them take it.
    """
    with TraceReader(path) as reader:
        try:
            scan = _ijson.basic_parse(reader, buf_size=_SCAN_BUFFER)
            deepest = max(accumulate(map(_DEPTH_CHANGE.__getitem__, map(itemgetter(0), scan))),
                          default=0)  # fmt: skip
        except ijson.JSONError as exc:
            raise ToolError(f"not valid JSON, or cut short ({_first_line(exc)})", path) from exc
    if deepest > MAX_DEPTH:
        raise ToolError(_too_deep(), path)


def _too_deep() -> str:
    return f"JSON nested more than {MAX_DEPTH} levels deep: not a trace nrlprof reads"


def check_events(batch: list[Any], path: Path) -> None:
    """Raise ToolError when an item of `traceEvents` is not an object (callers check after a TypeError)."""
    for index, event in enumerate(batch):
        if not isinstance(event, dict):
            raise ToolError(f"an event is not a JSON object: {_short_repr(event)} (item {index} of a batch)", path)


def unexpected_content(exc: Exception) -> str:
    """The reason given for a trace whose values have types nrlprof does not expect."""
    return f"unexpected content ({type(exc).__name__}: {_first_line(exc)})"


Unreadable = list[tuple[Path, str]]


def find_traces(inputs: Iterable[Path], exclude: Iterable[Path] = ()) -> tuple[list[TraceHeader], Unreadable]:
    """Chrome traces under `inputs` (files or directories, searched recursively) and the unreadable ones.

    A missing input raises ToolError. See `read_headers`.
    """
    return read_headers(find_inputs(inputs).traces, exclude)


def read_headers(
    candidates: Iterable[tuple[Path, bool]], exclude: Iterable[Path] = ()
) -> tuple[list[TraceHeader], Unreadable]:
    """The Chrome traces among the JSON files `candidates` ((path, named on the command line)), and the unreadable.

    A `*.pt.trace.json[.gz]` file, or a file named on the command line, that cannot be read is returned
    as unreadable; another `*.json[.gz]` is a trace only when it parses as an object with `traceEvents`.
    Merged timelines (nrlprof.merged) are left out.
    """
    excluded = {p.resolve() for p in exclude}
    found: list[TraceHeader] = []
    unreadable: Unreadable = []
    for path, explicit in candidates:
        if path.resolve() in excluded:
            continue
        try:
            header = read_header(path)
        except ToolError as exc:
            if explicit or _is_trace_name(path.name):
                unreadable.append((path, exc.reason))
            continue
        if not header.has_events:
            if explicit or _is_trace_name(path.name):
                unreadable.append((path, "not a Chrome trace: no traceEvents"))
            continue
        if header.is_merged:
            continue
        problem = header.problem()
        if problem is not None:
            unreadable.append((path, problem))
            continue
        found.append(header)
    return found, unreadable


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic garbage collector off for a while.

    Parsed events hold no reference cycles, yet each batch allocates tens of thousands of dicts, and the
    collector, triggered every few hundred, would rescan them again and again: half the time of a merge.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
