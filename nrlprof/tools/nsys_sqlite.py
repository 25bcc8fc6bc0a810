"""Per-step GPU time from Nsight Systems captures, read from their SQLite export with Python's sqlite3.

Steps are nrlprof's `step <n>` NVTX ranges (domain `nrlprof`; any domain when the export registers none).
Kernels, memcpys and memsets are attributed to a step by the start of the CUDA runtime call that launched
them (joined on correlationId), or by their own start when the export has no runtime table. Times in the
export are ns since the capture started; spans are returned in µs since the Unix epoch.
`nsys export --type sqlite` makes the export of a report that has none, when nsys is installed.
"""

from __future__ import annotations

import sqlite3
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from nrlprof.errors import ToolError
from nrlprof.layout import NSYS_SUFFIXES, parse_nsys_name
from nrlprof.tools.gpu_time import KERNEL, MEMCPY, MEMSET, LongestSpans, StepAttribution, StepGpu

SQLITE_SUFFIX = ".sqlite"
DOMAIN = "nrlprof"
STEP_RANGE_PREFIX = "step "
EXPORT_TIMEOUT_S = 600
_NVTX_DOMAIN_CREATE = 75
_NVTX_RANGES = (59, 60)  # NvtxStartEndRange, NvtxPushPopRange
_ACTIVITY_TABLES = (("CUPTI_ACTIVITY_KIND_MEMCPY", MEMCPY), ("CUPTI_ACTIVITY_KIND_MEMSET", MEMSET))
_RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"
_KERNELS = "CUPTI_ACTIVITY_KIND_KERNEL"


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


def capture_identity(path: Path) -> tuple[str, str, int | None]:
    """(worker, window, pid) from a report or export file name; the stem as worker when it is not nrlprof's."""
    name = path.name.removesuffix(SQLITE_SUFFIX)
    stem = next((name.removesuffix(s) for s in NSYS_SUFFIXES if name.endswith(s)), name)
    parsed = parse_nsys_name(stem)
    return (parsed.worker, parsed.window, parsed.pid) if parsed else (stem, "", None)


def export_stem(path: Path) -> str:
    """The name a report and its export share: without `.nsys-rep` / `.qdrep` / `.sqlite`."""
    name = path.name
    return next((name.removesuffix(s) for s in (*NSYS_SUFFIXES, SQLITE_SUFFIX) if name.endswith(s)), name)


def export_sqlite(nsys: str, report: Path, directory: Path) -> Path:
    """`nsys export --type sqlite` of `report` into `directory`; ToolError when nsys fails."""
    output = directory / (export_stem(report) + SQLITE_SUFFIX)
    command = [nsys, "export", "--type", "sqlite", "--force-overwrite", "true", "--output", str(output), str(report)]
    try:
        run = subprocess.run(command, capture_output=True, text=True, timeout=EXPORT_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ToolError(f"nsys export failed: {exc}", report) from exc
    if run.returncode != 0 or not output.is_file():
        detail = (run.stderr or run.stdout).strip().splitlines()
        raise ToolError(f"nsys export failed: {detail[-1] if detail else f'exit status {run.returncode}'}", report)
    return output


def read_reports(reports: list[Path], exports: list[Path], nsys: str | None) -> tuple[list[NsysCapture], list[str]]:
    """Captures of every export, and of every report without one (exported when nsys is given); notes."""
    by_stem = {export_stem(p): p for p in exports}
    captures, notes = [], []
    pending = [r for r in reports if export_stem(r) not in by_stem]
    for path in exports:
        try:
            captures.append(read_capture(path))
        except ToolError as exc:
            notes.append(f"{path}: {exc.reason}")
    if pending and nsys:
        with tempfile.TemporaryDirectory(prefix="nrlprof-nsys-") as tmp:
            for report in pending:
                try:
                    capture = read_capture(export_sqlite(nsys, report, Path(tmp)))
                except ToolError as exc:
                    notes.append(f"{report}: {exc.reason}")
                    continue
                capture.path = report
                captures.append(capture)
    return captures, notes


def read_capture(path: Path) -> NsysCapture:
    """Steps and per-step GPU figures of one SQLite export; ToolError when it is not one."""
    worker, window, pid = capture_identity(path)
    capture = NsysCapture(path, worker, window, pid)
    try:
        connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise ToolError(f"cannot open as SQLite: {exc}", path) from exc
    try:
        _read(connection, capture)
    except sqlite3.DatabaseError as exc:
        raise ToolError(f"not a readable Nsight Systems SQLite export ({exc})", path) from exc
    finally:
        connection.close()
    return capture


def _read(db: sqlite3.Connection, capture: NsysCapture) -> None:
    tables = {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if "NVTX_EVENTS" not in tables or "StringIds" not in tables:
        raise ToolError("no NVTX_EVENTS / StringIds table: not an Nsight Systems export with NVTX", capture.path)
    epoch_ns = 0
    if "TARGET_INFO_SESSION_START_TIME" in tables:
        row = db.execute("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME").fetchone()
        epoch_ns = int(row[0]) if row and row[0] is not None else 0
    windows = _step_windows(db, capture)
    to_us = 1e-3

    def epoch_us(ns: float) -> float:
        return (epoch_ns + ns) * to_us

    capture.steps = [(epoch_us(lo), epoch_us(hi), step) for lo, hi, step in windows]
    capture.ranges = [(label, epoch_us(lo), epoch_us(hi)) for label, lo, hi in capture.ranges]
    attribution = StepAttribution(windows)
    longest = LongestSpans()
    kernels: dict[str, list[float]] = {}
    for start, end, kind, name, anchor in _activities(db, tables):
        step = attribution.add(start, end, kind, name, anchor)
        if kind == KERNEL:
            stat = kernels.get(name) or kernels.setdefault(name, [0, 0.0])
            stat[0] += 1
            stat[1] += (end - start) * to_us
        if step is not None:
            longest.add(epoch_us(start), epoch_us(end), name)
    capture.step_gpu = attribution.finish(to_us)
    capture.kernels = {name: (int(calls), total) for name, (calls, total) in kernels.items()}
    capture.gpu_spans = longest.spans()


def _step_windows(db: sqlite3.Connection, capture: NsysCapture) -> list[tuple[float, float, int]]:
    created = "SELECT domainId FROM NVTX_EVENTS WHERE eventType = ? AND text = ?"
    domains = [d for (d,) in db.execute(created, (_NVTX_DOMAIN_CREATE, DOMAIN))]
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
        digits = label.removeprefix(STEP_RANGE_PREFIX)
        if label.startswith(STEP_RANGE_PREFIX) and digits.isascii() and digits.isdigit() and len(digits) <= 18:
            windows.append((float(start), float(end), int(digits)))
        elif label:
            capture.ranges.append((label, float(start), float(end)))
    return windows


def _activities(db: sqlite3.Connection, tables: set[str]):
    """(start, end, kind, name, anchor) of every kernel, memcpy and memset; anchor None without a runtime table."""
    runtime = _RUNTIME in tables
    if _KERNELS in tables:
        names = dict(
            db.execute(f"SELECT id, value FROM StringIds WHERE id IN (SELECT DISTINCT demangledName FROM {_KERNELS})")
        )
        yield from (
            (start, end, KERNEL, names.get(name_id, "?"), anchor)
            for start, end, name_id, anchor in db.execute(_activity_query(_KERNELS, "k.demangledName", runtime))
        )
    for table, kind in _ACTIVITY_TABLES:
        if table in tables:
            label = "memcpy" if kind == MEMCPY else "memset"
            for start, end, _, anchor in db.execute(_activity_query(table, "0", runtime)):
                yield start, end, kind, label, anchor


def _activity_query(table: str, name: str, runtime: bool) -> str:
    if not runtime:
        return f"SELECT k.start, k.end, {name}, NULL FROM {table} k"
    return (
        f"SELECT k.start, k.end, {name}, r.start FROM {table} k"
        f" LEFT JOIN {_RUNTIME} r ON r.correlationId = k.correlationId"
    )
