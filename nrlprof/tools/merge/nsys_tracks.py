"""Nsight Systems captures as timeline tracks, for a merge of a run that has them (alone or beside torch traces).

A capture is read from its SQLite export: one found under the inputs (beside its report or anywhere), or made
with `nsys export --type sqlite` into a temporary directory from a report that has none, where nsys is
installed (a report with neither is skipped, with the reason). Each capture becomes one process, named like a
torch trace's, `<worker> rank <r> (<host>)` (rank and host from the manifest that lists the report; the worker
and pid from its name): its NVTX ranges (nrlprof's `step <n>` and the annotated ranges) on a track per thread,
and every kernel, memcpy and memset on a track per GPU and CUDA stream. The export's times (ns since the
capture started) are moved onto the merge's clock.
"""

from __future__ import annotations

import contextlib
import sqlite3
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nrlprof.errors import ToolError
from nrlprof.layout import NSYS_EXPORT_SUFFIX
from nrlprof.tools.read.manifests import LoadedManifest
from nrlprof.tools.read.nsys_export import capture_identity, connect, export_sqlite, export_stem, export_tables

BATCH = 10_000
BYTES_PER_EVENT = 200  # of JSON text, for the size guard
NVTX_RANGE_TYPES = (59, 60)  # NvtxStartEndRange, NvtxPushPopRange
THREAD_ID_BITS = 0xFFFFFF  # nsys's globalTid holds the thread id in its low 24 bits
GPU_TID_BASE = 1 << 28  # track of GPU d, stream s: GPU_TID_BASE + d * STREAMS + s (above every thread id)
STREAMS = 1_000_000
ACTIVITIES = (("CUPTI_ACTIVITY_KIND_MEMCPY", "memcpy"), ("CUPTI_ACTIVITY_KIND_MEMSET", "memset"))
KERNELS = "CUPTI_ACTIVITY_KIND_KERNEL"


@dataclass
class Capture:
    """One export to draw: who wrote it, when its capture started (ns since the epoch), how many events."""

    export: Path
    source: Path  # the report (or the export itself) the user gave: what the result names
    worker: str
    pid: int | None
    rank: int | None = None
    host: str | None = None
    start_ns: int = 0
    events: int = 0

    @property
    def process_name(self) -> str:
        rank = f" rank {self.rank}" if self.rank is not None else ""
        where = self.host or (f"nsys pid {self.pid}" if self.pid is not None else "nsys")
        return f"{self.worker}{rank} ({where})"


@dataclass
class NsysInputs:
    """The captures a merge draws, and the reports and exports it could not read (with the reason)."""

    captures: list[Capture] = field(default_factory=list)
    skipped: list[tuple[Path, str]] = field(default_factory=list)


@contextlib.contextmanager
def nsys_inputs(
    reports: list[Path], exports: list[Path], nsys: str | None, manifests: list[LoadedManifest]
) -> Iterator[NsysInputs]:
    """The captures of `reports` and `exports` (exports made here live until the block ends)."""
    found = NsysInputs()
    by_stem = {export_stem(p): p for p in exports}
    for report in reports:  # `nsys stats` leaves its export beside the report
        sibling = report.with_name(export_stem(report) + NSYS_EXPORT_SUFFIX)
        if sibling.is_file():
            by_stem.setdefault(export_stem(report), sibling)
    sources = {export_stem(r): r for r in reports}
    owners = _owners(manifests)
    pending = [r for r in reports if export_stem(r) not in by_stem]
    with tempfile.TemporaryDirectory(prefix="nrlprof-merge-nsys-") as scratch:
        for report in pending:
            if nsys is None:
                found.skipped.append((report, "nsys not found to export this report (install Nsight Systems, "
                                              "or put its `nsys export --type sqlite` beside it)"))  # fmt: skip
                continue
            try:
                by_stem[export_stem(report)] = export_sqlite(nsys, report, Path(scratch))
            except ToolError as err:
                found.skipped.append((report, err.reason))
        for stem, export in sorted(by_stem.items()):
            source = sources.get(stem, export)
            try:
                found.captures.append(_open(export, source, owners.get(stem)))
            except ToolError as err:
                found.skipped.append((source, err.reason))
        yield found


def _owners(manifests: list[LoadedManifest]) -> dict[str, tuple[int | None, str | None]]:
    """Report stem -> (rank, host) of the manifest record that lists it."""
    owners = {}
    for manifest in manifests:
        for record in manifest.lines:
            if not isinstance(record, dict) or not isinstance(record.get("files"), list):
                continue
            rank = record.get("rank") if isinstance(record.get("rank"), int) else None
            host = record.get("host") if isinstance(record.get("host"), str) else None
            for name in record["files"]:
                if isinstance(name, str):
                    owners[export_stem(Path(name))] = (rank, host)
    return owners


def _tables(db: sqlite3.Connection) -> set[str]:
    return {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def _open(export: Path, source: Path, owner: tuple[int | None, str | None] | None) -> Capture:
    worker, _, pid = capture_identity(source)
    capture = Capture(export, source, worker, pid, *(owner or (None, None)))
    db = connect(export)
    try:
        tables, capture.start_ns = export_tables(db, source)
        counted = [f"SELECT count(*) FROM NVTX_EVENTS WHERE end IS NOT NULL AND eventType IN {NVTX_RANGE_TYPES}"]
        counted += [f"SELECT count(*) FROM {t}" for t in (KERNELS, *(a for a, _ in ACTIVITIES)) if t in tables]
        capture.events = sum(db.execute(query).fetchone()[0] for query in counted)
    except sqlite3.DatabaseError as exc:
        raise ToolError(f"not a readable Nsight Systems SQLite export ({exc})", source) from exc
    finally:
        db.close()
    return capture


def estimated_bytes(captures: list[Capture]) -> int:
    return sum(c.events for c in captures) * BYTES_PER_EVENT


def capture_events(capture: Capture, pid: int, origin_ns: int) -> Iterator[list[dict[str, Any]]]:
    """The capture's tracks in batches: metadata, NVTX ranges, then GPU activities; µs since `origin_ns`."""
    offset_us = (capture.start_ns - origin_ns) / 1000
    db = connect(capture.export)
    try:
        tables = _tables(db)
        yield [{"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": capture.process_name}}]
        threads: set[int] = set()
        nvtx = (
            "SELECT n.start, n.end, COALESCE(n.text, s.value), n.globalTid FROM NVTX_EVENTS n "
            f"LEFT JOIN StringIds s ON s.id = n.textId WHERE n.end IS NOT NULL AND n.eventType IN {NVTX_RANGE_TYPES}"
        )
        rows = ((start, end, str(text or ""), (tid or 0) & THREAD_ID_BITS, "nvtx") for start, end, text, tid in
                db.execute(nvtx))  # fmt: skip
        yield from _batches(rows, pid, offset_us, threads, "NVTX, thread {}")
        streams: set[int] = set()
        yield from _batches(_gpu_rows(db, tables), pid, offset_us, streams, "GPU {} stream {}")
    except sqlite3.DatabaseError as exc:
        raise ToolError(f"not a readable Nsight Systems SQLite export ({exc})", capture.source) from exc
    finally:
        db.close()


def _gpu_rows(db: sqlite3.Connection, tables: set[str]) -> Iterator[tuple[int, int, str, int, str]]:
    if KERNELS in tables:
        columns = {row[1] for row in db.execute(f"PRAGMA table_info({KERNELS})")}
        name = "shortName" if "shortName" in columns else "demangledName"
        query = (f"SELECT k.start, k.end, s.value, k.deviceId, k.streamId FROM {KERNELS} k "
                 f"LEFT JOIN StringIds s ON s.id = k.{name}")  # fmt: skip
        for start, end, kernel, device, stream in db.execute(query):
            yield start, end, str(kernel or "kernel"), _gpu_tid(device, stream), "kernel"
    for table, label in ACTIVITIES:
        if table in tables:
            for start, end, device, stream in db.execute(f"SELECT start, end, deviceId, streamId FROM {table}"):
                yield start, end, label, _gpu_tid(device, stream), label


def _gpu_tid(device: int | None, stream: int | None) -> int:
    return GPU_TID_BASE + int(device or 0) * STREAMS + int(stream or 0) % STREAMS


def _batches(
    rows: Iterator[tuple[int, int, str, int, str]], pid: int, offset_us: float, tracks: set[int], track_name: str
) -> Iterator[list[dict[str, Any]]]:
    batch: list[dict[str, Any]] = []
    for start, end, name, tid, category in rows:
        if tid not in tracks:
            tracks.add(tid)
            numbers = divmod(tid - GPU_TID_BASE, STREAMS) if tid >= GPU_TID_BASE else (tid,)
            label = track_name.format(*numbers)
            batch.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": label}})
        batch.append({"ph": "X", "cat": category, "name": name, "pid": pid, "tid": tid,
                      "ts": offset_us + start / 1000, "dur": max(0, end - start) / 1000})  # fmt: skip
        if len(batch) >= BATCH:
            yield batch
            batch = []
    if batch:
        yield batch
