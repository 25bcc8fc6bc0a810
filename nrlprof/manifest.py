"""The manifest: one JSON line per profiling window, so tools find every file on every node."""

from __future__ import annotations

import json
import os
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path

from nrlprof import layout

MANIFEST_GLOB = layout.MANIFEST_GLOB
NOT_UTF8 = "line is not UTF-8"
NOT_JSON = "line is not JSON"


@dataclass
class WindowRecord:
    """One window of one backend in one process.

    status: `ok`; `late` (the worker was busy when window actions came: its trace may miss work);
    `no-cuda` (nsys could not capture: no CUDA device); `missing` / `import-failed` (nsys wrote no report,
    or only its raw `.qdstrm`); `skipped` (another profiler was running, or a worker's child process that never
    imported torch); `exited` (a worker's child process exited or was killed during the window: no file); `died` (a
    worker found dead during the window: written by the process that drives it, with Ray's death cause); `truncated`
    (a torch window stopped early past its host budget, NRL_PROFILE_MAX_HOST_MB: its trace holds the steps before);
    `error`.
    start_ms / stop_ms: how long starting and stopping the profiler took in this process, on the step's path.
    finish_ms: how long finishing its files took beside the next step (a torch trace checked, compressed, and the
    controller's exported), once the stop had returned.
    asked: the request id of a window asked for while the job ran; empty for a planned window.
    """

    backend: str
    worker: str
    rank: int | None
    steps: list[int]
    window: str
    files: list[str] = field(default_factory=list)
    status: str = "ok"
    message: str = ""
    host: str = field(default_factory=socket.gethostname)
    node_ip: str = ""
    pid: int = field(default_factory=os.getpid)
    started_at: float = 0.0
    stopped_at: float = field(default_factory=time.time)
    start_ms: float = 0.0
    stop_ms: float = 0.0
    finish_ms: float = 0.0
    event: str = "window"
    # The request of a window asked for while the job ran (`nrlprof capture`); empty for a planned window.
    asked: str = ""


def record_dict(record: WindowRecord) -> dict:
    """The record as a dict, as `dataclasses.asdict` gives it, without its deep copy (4x faster: a stop's cost)."""
    return {**vars(record), "steps": list(record.steps), "files": list(record.files)}


def manifest_path(directory: str | Path) -> Path:
    return layout.manifest_path(directory, socket.gethostname(), os.getpid())


def append_record(directory: str | Path, record: WindowRecord) -> Path:
    """Append one line; a single write of a short line keeps lines whole across processes."""
    path = manifest_path(directory)
    path.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps(record_dict(record), sort_keys=True) + "\n"
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(line)
    return path


def parse_line(raw: bytes) -> dict | str:
    """One manifest line as its record, or why it is none (NOT_UTF8, NOT_JSON, or a line holding no object)."""
    try:
        record = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        return NOT_UTF8
    except (ValueError, RecursionError):  # json.JSONDecodeError is a ValueError
        return NOT_JSON
    if not isinstance(record, dict):
        return f"line is a JSON {type(record).__name__}, not an object"
    return record


def read_records(path: str | Path) -> list[dict]:
    """Records of one manifest; a torn line (a killed writer), bad UTF-8 or a line that is no object is skipped."""
    with open(path, "rb") as handle:
        return [record for record in map(parse_line, handle) if isinstance(record, dict)]
