"""The stand-in's report: a JSON document in `<name>[.<k>].nsys-rep`, and its `nsys export --type sqlite`.

A report holds: `format` ("nrlprof-nsys-standin-report/1"), `name` (output name, `%p` expanded), `range_index`
(k under repeat, else null), `launched_pid`, `command`, `options`, `capture_range`, `capture_range_end`,
`session_start_ns` (CLOCK_MONOTONIC at launch) and `session_start_utc_ns`, `start_ns` / `stop_ns` (CLOCK_MONOTONIC),
`started_by` ("cudaProfilerStart" | "launch"), `stopped_by` ("cudaProfilerStop" | "exit"), `start_caller` /
`stop_caller` ({pid, tid} or null; the first start and the stop that closed the last open range),
`process_ranges` (each process's own range in the capture: pid, start_ns, stop_ns, stopped_by "cudaProfilerStop"
| "exit"), and what NVTX showed inside the capture, of every process: `nvtx_ranges` (domain, message,
kind "push_pop" | "start_end", start_ns, end_ns (null: still open at the range's stop), pid, tid, end_tid; only
ranges begun inside the capture, as nsys records only events inside it), `nvtx_marks`, `nvtx_domains`.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

FORMAT = "nrlprof-nsys-standin-report/1"
# ENUM_NSYS_EVENT_TYPE ids of a real export (Nsight Systems 2025.3).
NVTX_MARK, NVTX_PUSH_POP, NVTX_START_END, NVTX_DOMAIN_CREATE = 34, 59, 60, 75
EVENT_TYPES = {33: "NvtxCategory", 34: "NvtxMark", 35: "NvtxPushRange", 36: "NvtxPopRange", 37: "NvtxStartRange",
               38: "NvtxEndRange", 39: "NvtxThread", 59: "NvtxPushPopRange", 60: "NvtxStartEndRange",
               75: "NvtxDomainCreate", 76: "NvtxDomainDestroy"}  # fmt: skip
# The subset of a real export's schema that analysis code reads (column names and order as in nsys 2025.3).
SCHEMA = """
CREATE TABLE StringIds (id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL, rangeId INTEGER,
    category INTEGER, color INTEGER, text TEXT, globalTid INTEGER, endGlobalTid INTEGER, textId INTEGER,
    domainId INTEGER, uint64Value INTEGER, int64Value INTEGER, doubleValue REAL, uint32Value INTEGER,
    int32Value INTEGER, floatValue REAL, jsonTextId INTEGER, jsonText TEXT, binaryData TEXT);
CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,
    contextId INTEGER NOT NULL, greenContextId INTEGER, streamId INTEGER NOT NULL, correlationId INTEGER,
    globalPid INTEGER, demangledName INTEGER NOT NULL, shortName INTEGER NOT NULL, mangledName INTEGER,
    launchType INTEGER, cacheConfig INTEGER, registersPerThread INTEGER NOT NULL, gridX INTEGER NOT NULL,
    gridY INTEGER NOT NULL, gridZ INTEGER NOT NULL, blockX INTEGER NOT NULL, blockY INTEGER NOT NULL,
    blockZ INTEGER NOT NULL, staticSharedMemory INTEGER NOT NULL, dynamicSharedMemory INTEGER NOT NULL,
    localMemoryPerThread INTEGER NOT NULL, localMemoryTotal INTEGER NOT NULL, gridId INTEGER NOT NULL,
    sharedMemoryExecuted INTEGER, graphNodeId INTEGER, sharedMemoryLimitConfig INTEGER);
CREATE TABLE ENUM_NSYS_EVENT_TYPE (id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT);
CREATE TABLE PROCESSES (globalPid INTEGER, pid INTEGER, name TEXT);
CREATE TABLE TARGET_INFO_SESSION_START_TIME (utcEpochNs INTEGER, utcTime TEXT, localTime TEXT);
"""


def global_pid(pid: int) -> int:
    """nsys's serialized GlobalId of a process (as in real exports: 2**48 + pid * 2**24)."""
    return (1 << 48) + (pid << 24)


def global_tid(pid: int, tid: int) -> int:
    return global_pid(pid) + tid


def write_atomically(path: Path, text: str) -> None:
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_text(text)
    temporary.replace(path)


def read_report(path: str | Path) -> dict:
    """A stand-in report as a dict; ValueError when the file is not one."""
    document = json.loads(Path(path).read_text())
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise ValueError(f"{path}: not an nsys stand-in report (format {FORMAT})")
    return document


def export_sqlite(report_path: str | Path, sqlite_path: str | Path) -> None:
    """The report's NVTX events in the tables and event type codes of a real `nsys export --type sqlite`."""
    report = read_report(report_path)
    origin = report["session_start_ns"]
    target = Path(sqlite_path)
    temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    temporary.unlink(missing_ok=True)
    connection = sqlite3.connect(temporary)
    try:
        connection.executescript(SCHEMA)
        strings: dict[str, int] = {}

        def string_id(value: str) -> int:
            return strings.setdefault(value, len(strings) + 1)

        domain_ids: dict[str | None, int] = {None: 0}
        rows = []
        for domain in report["nvtx_domains"]:
            if domain["name"] not in domain_ids:
                domain_ids[domain["name"]] = len(domain_ids)
                thread = global_tid(domain["pid"], domain["pid"])
                rows.append((domain["t"] - origin, None, NVTX_DOMAIN_CREATE, None, domain["name"], thread, None, None,
                             domain_ids[domain["name"]]))  # fmt: skip
        for number, item in enumerate(report["nvtx_ranges"], start=1):
            domain = domain_ids.setdefault(item["domain"], len(domain_ids))
            start_end = item["kind"] == "start_end"
            end = None if item["end_ns"] is None else item["end_ns"] - origin
            end_tid = None if item["end_tid"] is None else global_tid(item["pid"], item["end_tid"])
            rows.append((item["start_ns"] - origin, end, NVTX_START_END if start_end else NVTX_PUSH_POP,
                         number if start_end else None, None, global_tid(item["pid"], item["tid"]),
                         end_tid if start_end else None, string_id(item["message"] or ""), domain))  # fmt: skip
        for mark in report["nvtx_marks"]:
            domain = domain_ids.setdefault(mark["domain"], len(domain_ids))
            rows.append((mark["t"] - origin, None, NVTX_MARK, None, None, global_tid(mark["pid"], mark["tid"]), None,
                         string_id(mark["message"] or ""), domain))  # fmt: skip
        connection.executemany(
            "INSERT INTO NVTX_EVENTS (start, end, eventType, rangeId, text, globalTid, endGlobalTid, textId, domainId)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            sorted(rows, key=lambda row: row[0]),
        )
        connection.executemany("INSERT INTO StringIds VALUES (?, ?)", [(i, v) for v, i in strings.items()])
        connection.executemany("INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (?, ?, ?)",
                               [(i, name, name) for i, name in EVENT_TYPES.items()])  # fmt: skip
        pids = sorted({report["launched_pid"], *(r["pid"] for r in report["nvtx_ranges"])})
        connection.executemany("INSERT INTO PROCESSES VALUES (?, ?, ?)",
                               [(global_pid(pid), pid, report["command"][0] if pid == report["launched_pid"] else "")
                                for pid in pids])  # fmt: skip
        connection.execute("INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES (?, NULL, NULL)",
                           (report["session_start_utc_ns"],))  # fmt: skip
        connection.commit()
    finally:
        connection.close()
    temporary.replace(target)
