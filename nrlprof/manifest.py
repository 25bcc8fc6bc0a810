"""The manifest: one JSON line per profiling window, so tools find every file on every node."""

from __future__ import annotations

import json
import os
import socket
import time
from dataclasses import dataclass, field, replace
from enum import Enum
from pathlib import Path

from nrlprof import layout, wire

NOT_UTF8 = "line is not UTF-8"
NOT_JSON = "line is not JSON"


class Status(str, Enum):
    """How a window went in one process (a manifest line's `status`; what each means: ARCHITECTURE.md, "Manifest")."""

    OK = "ok"
    LATE = "late"
    SKIPPED = "skipped"
    NO_CUDA = "no-cuda"
    NO_COLLECTION = "no-collection"
    MISSING = "missing"
    IMPORT_FAILED = "import-failed"
    PENDING = "pending"
    EXITED = "exited"
    DIED = "died"
    TRUNCATED = "truncated"
    ERROR = "error"
    OOM = "oom"
    LIFETIME = "lifetime"

    def __str__(self) -> str:
        return self.value


# Trigger.cause: the step's wall time against the median of the steps before it, or one rank's call against its peers'.
SLOW_STEP = "slow step"
STRAGGLER = "straggler"


@dataclass(frozen=True)
class Slowest:
    """The worker rank whose call held a step longest (or straggled): the call, and the median of the same method's
    calls of its group's other ranks in that step (None where it has no peers)."""

    worker: str
    rank: int
    method: str
    ms: float
    peers_ms: float | None = None


@dataclass(frozen=True)
class Trigger:
    """Why a window opened by itself, or a step's trace was kept (NRL_*_STEP_RANGE=slow, slow:keep): step `step` took
    `wall_ms`, `factor` times `median_ms`, the median of the steps before it; for a straggler, `factor` is its call's
    over its peers' median."""

    step: int
    wall_ms: float
    median_ms: float
    factor: float
    slowest: Slowest | None = None
    cause: str = SLOW_STEP


@dataclass(frozen=True)
class WindowRecord:
    """One window of one backend in one process: a manifest line, and what a process answers a window's stop with.

    start_ms / stop_ms: how long starting and stopping the profiler took in this process, on the step's path.
    finish_ms: how long finishing its files took beside the next step (a torch trace checked, compressed, and the
    controller's exported), once the stop had returned.
    asked: the request id of a window asked for while the job ran (`nrlprof capture`); empty for a planned window.
    trigger: what opened a window for a slow step, or kept a slow step's trace; None otherwise (and not in the line).
    """

    backend: str
    worker: str
    rank: int | None
    steps: tuple[int, ...]
    window: str
    files: tuple[str, ...] = ()
    status: Status = Status.OK
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
    asked: str = ""
    trigger: Trigger | None = None

    def __post_init__(self) -> None:
        set_field = object.__setattr__
        set_field(self, "steps", tuple(self.steps))
        set_field(self, "files", tuple(self.files))
        set_field(self, "status", Status(self.status))

    def replaced(self, **changes: object) -> WindowRecord:
        return replace(self, **changes)

    def as_dict(self) -> dict:
        """The record as its manifest line holds it."""
        line = {**vars(self), "steps": list(self.steps), "files": list(self.files), "status": self.status.value}
        if self.trigger is None:
            del line["trigger"]
        else:
            line["trigger"] = wire.to_builtins(self.trigger)
        return line


def manifest_path(directory: str | Path) -> Path:
    return layout.manifest_path(directory, socket.gethostname(), os.getpid())


def append_record(directory: str | Path, record: WindowRecord) -> Path:
    """Append one line; a single write of a short line keeps lines whole across processes."""
    path = manifest_path(directory)
    path.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps(record.as_dict(), sort_keys=True) + "\n"
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
