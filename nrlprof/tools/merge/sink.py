"""Writing a merged timeline: its parts (Segment), the output renamed into place when complete (Sink), progress."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

from nrlprof import compact_json
from nrlprof.tools.merge.gzip_member import DeflateStream, gzip_header, gzip_trailer
from nrlprof.tools.output import AtomicOutput
from nrlprof.tools.progress import ProgressCallback


def event_text(events: list[dict[str, Any]], first: bool) -> bytes:
    """The events as JSON array items, a line per batch, led by a comma unless they come first."""
    text = compact_json.dumps(events)
    return text[1:-1] if first else b",\n" + text[1:-1]


class Segment:
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
        data = event_text(events, first=not self.events)
        self.events += len(events)
        if self._deflate is None:
            self._file.write(data)
        else:
            self._deflate.write(data)

    def __enter__(self) -> Segment:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._deflate is not None and exc[0] is None:
            self._deflate.full_flush()
        self._file.close()


class Sink:
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
        self.text_bytes = 0  # of JSON written, before compression
        if self._deflate is not None:
            self._file.write(gzip_header())

    def write_events(self, events: list[dict[str, Any]]) -> None:
        if events:
            self.write(event_text(events, first=not self._events))
            self._events += len(events)

    def write(self, data: bytes) -> None:
        if self._deflate is None:
            self.text_bytes += len(data)
            self._file.write(data)
        else:
            self._deflate.write(data)

    def append_part(self, path: Path, events: int, crc: int, size: int) -> None:
        """A part file of `events` events (compressed: raw deflate of `size` bytes of text with CRC `crc`)."""
        if not events:
            return
        if self._events:
            self.write(b",\n")
        self._events += events
        if self._deflate is not None:
            self._deflate.full_flush()
            self._deflate.splice(crc, size)
        else:
            self.text_bytes += os.path.getsize(path)
        with open(path, "rb") as source:
            shutil.copyfileobj(source, self._file, 1 << 20)

    def commit(self) -> None:
        if self._deflate is not None:
            self.text_bytes = self._deflate.size
            self._deflate.finish()
            self._file.write(gzip_trailer(self._deflate.crc, self._deflate.size))
        self._output.commit()

    def abort(self) -> None:
        self._output.abort()


class Meter:
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
