"""What one set of a run's files says, read where the files are: the part of a summary that reads files.

`read_file_set` reads the files of one `Inputs` (a directory walked here, or the files a node holds) into a
`FileSetFigures`: plain, picklable data that holds figures, not events. `figures.summarize.assemble` turns one
or several of them (one per node, read there) into the same `Summary`. Every item keeps the path it was read
from, so that items of several sets can be put in the order one walk of all the files would give.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nrlprof.tools.figures.memory import MemoryReading, read_memory
from nrlprof.tools.figures.nsys_capture import CaptureNote, NsysCapture, read_reports
from nrlprof.tools.figures.trace_pool import Reader, default_jobs, read_one, read_traces
from nrlprof.tools.figures.trace_stats import TraceStats
from nrlprof.tools.read.inputs import Inputs
from nrlprof.tools.read.manifests import LoadedManifest, load_manifest
from nrlprof.tools.read.nsys_export import export_stem
from nrlprof.tools.read.nsys_stats import NsysReport, summarize_nsys
from nrlprof.tools.read.traces import TraceHeader, read_headers


@dataclass
class FileSetFigures:
    """The figures of one set of files, each item with the path it came from."""

    unreadable: list[tuple[Path, str]] = field(default_factory=list)  # JSON files that are no readable trace
    traces: list[tuple[TraceHeader, TraceStats | str]] = field(default_factory=list)  # figures, or why none
    nsys_reports: list[NsysReport] = field(default_factory=list)
    reports_without_nsys: int = 0  # reports `nsys stats` could not summarise: no nsys where they are
    captures: list[NsysCapture] = field(default_factory=list)
    capture_notes: list[CaptureNote] = field(default_factory=list)
    unread_reports: list[Path] = field(default_factory=list)  # reports with no export and no nsys to make one
    memory: MemoryReading = field(default_factory=MemoryReading)
    manifests: list[LoadedManifest] = field(default_factory=list)
    names: set[str] = field(default_factory=set)  # every file name present, for the manifests' missing files
    inputs: int = 0  # traces (readable or not), reports, exports and memory files found

    def relabel(self, rename: Callable[[Path], Path]) -> None:
        """Every path of the set renamed (a node's path shown as `<node>:<path>`, for one)."""
        self.unreadable = [(rename(p), reason) for p, reason in self.unreadable]
        for header, _ in self.traces:
            header.path = rename(header.path)
        for item in (*self.nsys_reports, *self.captures):
            item.path = rename(item.path)
        self.capture_notes = [CaptureNote(rename(n.path), n.reason, n.from_report) for n in self.capture_notes]
        self.unread_reports = [rename(p) for p in self.unread_reports]
        memory = self.memory
        for file in memory.files:
            file.path = rename(file.path)
        memory.skipped = [(rename(p), reason) for p, reason in memory.skipped]
        for entry in memory.snapshots:
            entry["path"] = rename(entry["path"])
        for manifest in self.manifests:
            manifest.path = rename(manifest.path)


def read_file_set(
    found: Inputs, nsys: str | None = None, progress: Any = None, jobs: int | None = None, reader: Reader = read_one
) -> FileSetFigures:
    """Read every input of `found`: traces (`jobs` processes; default trace_pool.default_jobs), nsys reports
    and exports (`nsys`: the executable, "" for none; default: found on PATH), memory files, manifests.

    `reader`: what reads one trace (trace_pool.read_traces); with `jobs` 1, any callable."""
    headers, unreadable = read_headers(found.traces)
    reports, exports = found.nsys_reports, found.nsys_exports
    figures = FileSetFigures(unreadable=list(unreadable), names=set(found.names))
    figures.inputs = len(headers) + len(unreadable) + len(reports) + len(exports)
    figures.inputs += len(found.memory_figures) + len(found.memory_snapshots)
    figures.memory = read_memory(found)
    ordered = sorted(headers, key=TraceHeader.sort_key)
    figures.traces = list(read_traces(ordered, default_jobs(ordered) if jobs is None else jobs, progress, reader))
    nsys = nsys if nsys is not None else shutil.which("nsys")
    figures.nsys_reports, _ = summarize_nsys(reports, nsys)  # its one note: no nsys, said by the assembly
    figures.reports_without_nsys = len(reports) if nsys is None else 0
    figures.captures, figures.capture_notes = read_reports(reports, exports, nsys or None)
    read = {export_stem(c.path) for c in figures.captures} | {export_stem(n.path) for n in figures.capture_notes}
    figures.unread_reports = [r for r in reports if export_stem(r) not in read]  # no nsys to export them
    figures.manifests = [load_manifest(path) for path in found.manifests]
    return figures
