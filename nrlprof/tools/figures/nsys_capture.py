"""Per-step GPU time from Nsight Systems captures, read from their SQLite export with Python's sqlite3.

Steps are nrlprof's `step <n>` NVTX ranges (domain `nrlprof`; any domain when the export registers none).
Kernels, memcpys and memsets are attributed to a step by the start of the CUDA runtime call that launched
them (joined on correlationId), or by their own start when the export has no runtime table; SQLite sums
them per step. Times in the
export are ns since the capture started; spans are returned in µs since the Unix epoch.
`nsys export --type sqlite` makes the export of a report that has none, when nsys is installed.
"""

from __future__ import annotations

import sqlite3
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from nrlprof.errors import ToolError
from nrlprof.layout import NSYS_EXPORT_SUFFIX, NVTX_DOMAIN, NVTX_STEP_PREFIX, step_number
from nrlprof.tools.figures.gpu_time import (
    KERNEL,
    MAX_GPU_SPANS,
    MEMCPY,
    MEMSET,
    StepGpu,
    exposed_collectives,
    is_comm,
)
from nrlprof.tools.read.nsys_export import capture_identity, connect, export_sqlite, export_stem, export_tables

_NVTX_DOMAIN_CREATE = 75
_NVTX_RANGES = (59, 60)  # NvtxStartEndRange, NvtxPushPopRange
_ACTIVITY_TABLES = (("CUPTI_ACTIVITY_KIND_MEMCPY", MEMCPY), ("CUPTI_ACTIVITY_KIND_MEMSET", MEMSET))
_RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"
_KERNELS = "CUPTI_ACTIVITY_KIND_KERNEL"
# Each activity in the step window that holds its anchor (the launching call's start, or its own).
_PLACED = """
    SELECT w.step, w.lo, w.hi, a.s, a.e, a.kind, a.n FROM ({activities}) a
    JOIN nrlprof_steps w
      ON w.rowid = (SELECT rowid FROM nrlprof_steps WHERE lo <= a.anchor ORDER BY lo DESC LIMIT 1)
    WHERE a.anchor <= w.hi"""


@dataclass
class NsysCapture:
    """What one capture's export says, per step; spans in µs since the epoch, figures in µs."""

    path: Path
    worker: str
    window: str
    pid: int | None
    steps: list[tuple[float, float, int]] = field(default_factory=list)
    step_gpu: dict[int, StepGpu] = field(default_factory=dict)
    kernels: dict[str, tuple[int, float]] = field(default_factory=dict)
    gpu_spans: list[tuple[float, float, str]] = field(default_factory=list)
    ranges: list[tuple[str, float, float]] = field(default_factory=list)
    from_report: bool = False  # exported here from its report (read after the exports that were there)


@dataclass(frozen=True)
class CaptureNote:
    """An export or report that gave no capture, and why."""

    path: Path
    reason: str
    from_report: bool = False

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


def read_reports(
    reports: list[Path], exports: list[Path], nsys: str | None
) -> tuple[list[NsysCapture], list[CaptureNote]]:
    """Captures of every export, then of every report without one (exported when nsys is given); notes."""
    by_stem = {export_stem(p): p for p in exports}
    captures, notes = [], []
    for report in reports:  # `nsys stats` leaves its export next to the report
        sibling = report.with_name(export_stem(report) + NSYS_EXPORT_SUFFIX)
        if export_stem(report) not in by_stem and sibling.is_file():
            by_stem[export_stem(report)] = sibling
            exports = [*exports, sibling]
    pending = [r for r in reports if export_stem(r) not in by_stem]
    for path in exports:
        try:
            captures.append(read_capture(path))
        except ToolError as exc:
            notes.append(CaptureNote(path, exc.reason))
    if pending and nsys:
        with tempfile.TemporaryDirectory(prefix="nrlprof-nsys-") as tmp:
            for report in pending:
                try:
                    capture = read_capture(export_sqlite(nsys, report, Path(tmp)))
                except ToolError as exc:
                    notes.append(CaptureNote(report, exc.reason, from_report=True))
                    continue
                capture.path, capture.from_report = report, True
                captures.append(capture)
    return captures, notes


def read_capture(path: Path) -> NsysCapture:
    """Steps and per-step GPU figures of one SQLite export; ToolError when it is not one."""
    worker, window, pid = capture_identity(path)
    capture = NsysCapture(path, worker, window, pid)
    connection = connect(path)
    try:
        _read(connection, capture)
    except sqlite3.DatabaseError as exc:
        raise ToolError(f"not a readable Nsight Systems SQLite export ({exc})", path) from exc
    finally:
        connection.close()
    return capture


def _read(db: sqlite3.Connection, capture: NsysCapture) -> None:
    tables, epoch_ns = export_tables(db, capture.path)
    windows = _step_windows(db, capture)
    to_us = 1e-3

    def epoch_us(ns: float) -> float:
        return (epoch_ns + ns) * to_us

    capture.steps = [(epoch_us(lo), epoch_us(hi), step) for lo, hi, step in windows]
    capture.ranges = [(label, epoch_us(lo), epoch_us(hi)) for label, lo, hi in capture.ranges]
    names = _kernel_names(db, tables)
    comm = [i for i, name in names.items() if is_comm(name)]
    capture.step_gpu = _step_figures(db, tables, windows, comm)
    if _KERNELS in tables:
        totals = f"SELECT demangledName, count(*), sum(end - start) FROM {_KERNELS} GROUP BY demangledName"
        capture.kernels = {names.get(i, "?"): (calls, ns * to_us) for i, calls, ns in db.execute(totals)}
    labels = {MEMCPY: "memcpy", MEMSET: "memset"}
    rows = db.execute(_longest_query(tables, MAX_GPU_SPANS))
    capture.gpu_spans = sorted(  # the longest already, chosen by the query
        (epoch_us(start), epoch_us(end), names.get(name_id, "?") if kind == KERNEL else labels[kind])
        for start, end, name_id, kind in rows
    )


def _kernel_names(db: sqlite3.Connection, tables: set[str]) -> dict[int, str]:
    if _KERNELS not in tables:
        return {}
    used = f"SELECT id, value FROM StringIds WHERE id IN (SELECT DISTINCT demangledName FROM {_KERNELS})"
    return dict(db.execute(used))


def _activities_sql(tables: set[str]) -> str:
    """(s, e, kind, n, anchor) of every kernel, memcpy and memset; anchor: the launching runtime call's start."""
    parts = []
    for table, kind, name in ((_KERNELS, KERNEL, "k.demangledName"), *((t, k, "-1") for t, k in _ACTIVITY_TABLES)):
        if table not in tables:
            continue
        columns = f"SELECT k.start AS s, k.end AS e, {kind} AS kind, {name} AS n"
        if _RUNTIME in tables:
            join = f"LEFT JOIN {_RUNTIME} r ON r.correlationId = k.correlationId"
            parts.append(f"{columns}, coalesce(r.start, k.start) AS anchor FROM {table} k {join}")
        else:
            parts.append(f"{columns}, k.start AS anchor FROM {table} k")
    return " UNION ALL ".join(parts) or "SELECT 0 AS s, 0 AS e, 0 AS kind, 0 AS n, 0 AS anchor WHERE 0"


def _step_figures(
    db: sqlite3.Connection, tables: set[str], windows: list[tuple[float, float, int]], comm: list[int]
) -> dict[int, StepGpu]:
    """Per step: kernel, NCCL and copy time, and busy time (union of intervals inside the window), in µs.

    SQLite does the work: activities joined to the window holding their anchor, and a running maximum of
    end times over start order (a window function) gives each interval's part not covered before it.
    """
    db.execute("CREATE TEMP TABLE IF NOT EXISTS nrlprof_steps (lo INTEGER, hi INTEGER, step INTEGER)")
    db.execute("DELETE FROM nrlprof_steps")
    db.executemany("INSERT INTO nrlprof_steps VALUES (?, ?, ?)", windows)
    db.execute("CREATE INDEX IF NOT EXISTS temp.nrlprof_steps_lo ON nrlprof_steps (lo)")
    comm_ids = ", ".join(str(int(i)) for i in comm) or "NULL"
    query = f"""
        WITH placed AS ({_PLACED.format(activities=_activities_sql(tables))}), reach AS (
            SELECT *, max(e) OVER (PARTITION BY step, lo ORDER BY s, e
                                   ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS before FROM placed
        )
        SELECT step,
            total(CASE WHEN kind = {KERNEL} THEN e - s END), total(kind = {KERNEL}),
            total(CASE WHEN kind = {KERNEL} AND n IN ({comm_ids}) THEN e - s END),
            total(CASE WHEN kind != {KERNEL} THEN e - s END),
            total(max(0, min(e, hi) - max(s, lo, coalesce(before, lo))))
        FROM reach GROUP BY step"""
    figures = {step: StepGpu(wall_us=0.0) for _, _, step in windows}
    for lo, hi, step in windows:
        figures[step].wall_us += (hi - lo) / 1000
    for step, kernel, count, comm_ns, copy_ns, busy in db.execute(query):
        item = figures[step]
        item.kernel_us, item.kernels = kernel / 1000, int(count)
        item.comm_us, item.memcpy_us, item.busy_us = comm_ns / 1000, copy_ns / 1000, busy / 1000
    if comm:
        _add_exposed_comm(db, tables, comm_ids, figures)
    return figures


def _add_exposed_comm(db: sqlite3.Connection, tables: set[str], comm_ids: str, figures: dict[int, StepGpu]) -> None:
    """Per step with collectives: their union and the part no compute kernel overlaps, from the kernels placed."""
    query = f"""
        WITH placed AS ({_PLACED.format(activities=_activities_sql(tables))})
        SELECT step, lo, hi, s, e, n IN ({comm_ids}) FROM placed WHERE kind = {KERNEL}
          AND step IN (SELECT DISTINCT step FROM placed WHERE kind = {KERNEL} AND n IN ({comm_ids}))"""
    kernels: dict[tuple[int, float, float], list[tuple[float, float, bool]]] = {}
    for step, lo, hi, start, end, collective in db.execute(query):
        kernels.setdefault((step, lo, hi), []).append((start, end, bool(collective)))
    for (step, lo, hi), spans in kernels.items():
        union, exposed = exposed_collectives(spans, lo, hi)
        figures[step].comm_union_us += union / 1000
        figures[step].exposed_comm_us += exposed / 1000


def _longest_query(tables: set[str], limit: int) -> str:
    return f"SELECT s, e, n, kind FROM ({_activities_sql(tables - {_RUNTIME})}) ORDER BY e - s DESC LIMIT {int(limit)}"


def _step_windows(db: sqlite3.Connection, capture: NsysCapture) -> list[tuple[float, float, int]]:
    created = "SELECT domainId FROM NVTX_EVENTS WHERE eventType = ? AND text = ?"
    domains = [d for (d,) in db.execute(created, (_NVTX_DOMAIN_CREATE, NVTX_DOMAIN))]
    query = (
        "SELECT n.start, n.end, COALESCE(n.text, s.value) FROM NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = n.textId"
        f" WHERE n.end IS NOT NULL AND n.eventType IN {_NVTX_RANGES}"
    )
    params: tuple = ()
    if domains:
        query += f" AND n.domainId IN ({', '.join('?' * len(domains))})"
        params = tuple(domains)
    windows = []
    for start, end, text in db.execute(query, params):
        label = str(text or "")
        step = step_number(label, NVTX_STEP_PREFIX)
        if step is not None:
            windows.append((float(start), float(end), step))
        elif label:
            capture.ranges.append((label, float(start), float(end)))
    return windows
