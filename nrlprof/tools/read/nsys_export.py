"""Nsight Systems reports and their SQLite exports: whose capture a file is, `nsys export` of a report, and the
export opened read-only."""

from __future__ import annotations

import sqlite3
import subprocess
from pathlib import Path

from nrlprof.errors import ToolError
from nrlprof.layout import NSYS_EXPORT_SUFFIX, nsys_stem, parse_nsys_name

EXPORT_TIMEOUT_S = 600


def capture_identity(path: Path) -> tuple[str, str, int | None]:
    """(worker, window, pid) from a report or export file name; the stem as worker when it is not nrlprof's."""
    stem = nsys_stem(path.name)
    parsed = parse_nsys_name(stem)
    return (parsed.worker, parsed.window, parsed.pid) if parsed else (stem, "", None)


def export_stem(path: Path) -> str:
    """The name a report and its export share (layout.nsys_stem)."""
    return nsys_stem(path.name)


def export_sqlite(nsys: str, report: Path, directory: Path) -> Path:
    """`nsys export --type sqlite` of `report` into `directory`; ToolError when nsys fails."""
    output = directory / (export_stem(report) + NSYS_EXPORT_SUFFIX)
    command = [nsys, "export", "--type", "sqlite", "--force-overwrite", "true", "--output", str(output), str(report)]
    try:
        run = subprocess.run(command, capture_output=True, text=True, timeout=EXPORT_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ToolError(f"nsys export failed: {exc}", report) from exc
    if run.returncode != 0 or not output.is_file():
        detail = (run.stderr or run.stdout).strip().splitlines()
        raise ToolError(f"nsys export failed: {detail[-1] if detail else f'exit status {run.returncode}'}", report)
    return output


def connect(path: Path) -> sqlite3.Connection:
    try:
        return sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise ToolError(f"cannot open as SQLite: {exc}", path) from exc


def export_tables(db: sqlite3.Connection, source: Path) -> tuple[set[str], int]:
    """The export's tables and when its capture started (ns since the epoch; 0 where it does not say); ToolError
    naming `source` for an export without NVTX."""
    tables = {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if "NVTX_EVENTS" not in tables or "StringIds" not in tables:
        raise ToolError("no NVTX_EVENTS / StringIds table: not an Nsight Systems export with NVTX", source)
    if "TARGET_INFO_SESSION_START_TIME" not in tables:
        return tables, 0
    row = db.execute("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME").fetchone()
    return tables, int(row[0]) if row and row[0] is not None else 0
