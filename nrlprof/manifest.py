"""The manifest: one JSON line per profiling window, so tools find every file on every node."""

from __future__ import annotations

import json
import os
import socket
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

MANIFEST_DIR_NAME = "nrlprof"
MANIFEST_GLOB = "manifest-*.jsonl"


@dataclass
class WindowRecord:
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
    event: str = "window"


def manifest_path(directory: str | Path) -> Path:
    return Path(directory) / f"manifest-{socket.gethostname()}-{os.getpid()}.jsonl"


def append_record(directory: str | Path, record: WindowRecord) -> Path:
    """Append one line; a single write of a short line keeps lines whole across processes."""
    path = manifest_path(directory)
    path.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps(asdict(record), sort_keys=True) + "\n"
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(line)
    return path


def read_records(path: str | Path) -> list[dict]:
    """Records of one manifest; a torn last line (a killed writer) is skipped."""
    records = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return records
