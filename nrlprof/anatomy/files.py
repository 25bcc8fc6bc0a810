"""The step-anatomy files: one run directory per driver session, JSONL files appended line by line.

`<NRL_STEP_ANATOMY_DIR>/run-<UTC time>-<pid>/`: `meta.jsonl` (job, driver node), `steps.jsonl` (each
`nrlprof.step(n)` and the finish, driver wall clock in ns), `actors.jsonl` (actor id -> worker, rank),
`tasks.jsonl` (one finished actor-method call each), `gaps.jsonl` (the reads at which Ray's GCS, full, may
have let calls go before they were read: from `since_ns`, 0 for the job's start, to `at_ns`).  Each write is
one `os.write` of whole lines on an `O_APPEND` descriptor, so a reader never sees half a line from a live
writer.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from nrlprof import compact_json
from nrlprof.errors import ToolError

META_FILE = "meta.jsonl"
STEPS_FILE = "steps.jsonl"
ACTORS_FILE = "actors.jsonl"
TASKS_FILE = "tasks.jsonl"
READER_FILE = "reader.jsonl"  # the reader process's own figures
GAPS_FILE = "gaps.jsonl"
RUN_PREFIX = "run-"


def new_run_directory(root: str) -> Path:
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    run = Path(root) / f"{RUN_PREFIX}{stamp}-{os.getpid()}"
    run.mkdir(parents=True, exist_ok=True)
    return run


def append_lines(path: Path, records: list[dict]) -> None:
    """Whole lines in one append: atomic against readers and other appenders on a local file system."""
    if not records:
        return
    data = b"".join(compact_json.dumps(record) + b"\n" for record in records)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
    finally:
        os.close(fd)


def read_lines(path: Path) -> list[dict]:
    """The records of a JSONL file; a torn last line (a killed writer) is skipped."""
    if not path.is_file():
        return []
    records = []
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            if not line.endswith("\n"):
                break
            try:
                records.append(json.loads(line))
            except ValueError:
                continue
    return records


def run_directories(directory: str | os.PathLike) -> list[Path]:
    """The run directories under `directory` (oldest first), or `directory` itself when it is one run."""
    root = Path(directory)
    if not root.is_dir():
        raise ToolError("no such step-anatomy directory", root)
    if (root / STEPS_FILE).is_file():
        return [root]
    runs = sorted(p for p in root.iterdir() if p.is_dir() and (p / STEPS_FILE).is_file())
    if not runs and (root / "step_anatomy").is_dir():
        return run_directories(root / "step_anatomy")
    return runs


def latest_run(directory: str | os.PathLike) -> Path:
    runs = run_directories(directory)
    if not runs:
        raise ToolError(f"no step-anatomy run (no {STEPS_FILE} in a run-* directory)", directory)
    return runs[-1]
