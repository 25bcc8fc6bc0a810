"""Allocator snapshots the viewer opens: pickled with protocol 4 (pytorch.org/memory_viz rejects protocol 5, which
torch's own `_dump_snapshot` uses: pytorch #183842), recorded with Python stacks unless told otherwise (C++ frames
make a dump minutes long: torchtitan #3628), and one of 1 GB or more (the viewer crashes on it: pytorch #176290)
named in the log with what to change."""

from __future__ import annotations

import os
import pickle
from pathlib import Path
from typing import Any

from nrlprof.config.memory import ALL_STACKS
from nrlprof.config.variables import MEMORY_MAX_ENTRIES_VARIABLE, MEMORY_STACKS_VARIABLE
from nrlprof.log import logger

SNAPSHOT_PROTOCOL = 4
MB = 1 << 20
VIEWER_LIMIT_BYTES = 1024 * MB


def write_snapshot(snapshot: Any, path: Path) -> int:
    """The snapshot written whole at `path` with the viewer's pickle protocol; its size in bytes."""
    partial = path.with_name(f".{path.name}.partial")
    with open(partial, "wb") as handle:
        pickle.dump(snapshot, handle, protocol=SNAPSHOT_PROTOCOL)
        size = handle.tell()
    os.replace(partial, path)
    return size


def say_if_too_big(size: int, path: Path, worker: str, max_entries: int, stacks: str,
                   limit: int = VIEWER_LIMIT_BYTES) -> bool:  # fmt: skip
    """A snapshot the viewer cannot open is said once, with the settings that make it smaller."""
    if size < limit:
        return False
    smaller = [f"lower {MEMORY_MAX_ENTRIES_VARIABLE} (now {max_entries})", "profile fewer steps per window"]
    if stacks == ALL_STACKS:
        smaller.insert(0, f"unset {MEMORY_STACKS_VARIABLE}=all (C++ frames make snapshots far larger)")
    logger.warning(
        "memory: the allocator snapshot of %s is %.0f MB (%s): pytorch.org/memory_viz cannot open one of %.0f MB or "
        "more; to make it smaller, %s",
        worker,
        size / MB,
        path,
        limit / MB,
        ", or ".join(smaller),
    )
    return True
