"""Memory figures as Perfetto counter tracks ("ph": "C") in a merged trace, one series per figure.

A step's figures are placed on the merged clock by the step's end: the figures' own `t_us` (epoch
microseconds at the step's end, its start `wall_ms` before) when the file has it, else the span of
`ProfilerStep#<n>` in a torch trace of the same process. A file with neither is skipped with that
reason. RSS, allocated and reserved are placed at the step's end (their value then); a peak at the step's
start (it held during the step).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from nrlprof.tools.merge.rewrite import PID_BLOCK
from nrlprof.tools.read.memory import MemoryFile

GroupKey = tuple[Any, ...]
NO_TIMES = (
    "memory figures have no step times (t_us) and no torch trace of the same process marks these steps "
    "(ProfilerStep#<n>): not placed on the timeline"
)


def group_key(file: MemoryFile) -> GroupKey:
    """The same key merge gives a torch trace of this process: (host, pid, rank, worker)."""
    return (file.host, file.pid, file.rank, file.worker)


def process_label(file: MemoryFile) -> str:
    if file.worker == "controller" and file.rank is None:
        return f"controller ({file.host})"
    rank = f" rank {file.rank}" if file.rank is not None else ""
    return f"{file.worker}{rank} ({file.host})"


@dataclass
class CounterTracks:
    events: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[tuple[Any, str]] = field(default_factory=list)
    files: int = 0


def _counter(name: str, pid: int, ts: float, value: float) -> dict[str, Any]:
    return {"ph": "C", "name": name, "pid": pid, "tid": 0, "ts": round(ts, 3), "args": {"MB": round(value, 3)}}


def counter_events(
    files: list[MemoryFile],
    origin_us: float,
    pid_of: dict[GroupKey, int],
    step_ends: dict[GroupKey, dict[int, tuple[float, float]]],
) -> CounterTracks:
    """Counter events of every file.

    `pid_of`: the merged pid of each file's process; `step_ends`: per process, (start, end) of each
    ProfilerStep#n on the merged clock.
    """
    tracks = CounterTracks()
    for file in files:
        key = group_key(file)
        ends = step_ends.get(key, {})
        if not file.steps:
            continue
        if not all(s.end_us is not None or s.step in ends for s in file.steps):
            tracks.skipped.append((file.path, NO_TIMES))
            continue
        pid = pid_of[key]
        for sample in file.steps:
            if sample.end_us is not None:
                end = sample.end_us - origin_us
                start = end - sample.wall_ms * 1000 if sample.wall_ms is not None else end
            else:
                start, end = ends[sample.step]
            host = sample.host
            if "host_rss_mb" in host:
                tracks.events.append(_counter("host RSS", pid, end, host["host_rss_mb"]))
            if "host_peak_mb" in host:
                tracks.events.append(_counter("host peak", pid, start, host["host_peak_mb"]))
            for device, figures in sample.cuda.items():
                tracks.events.append(_counter(f"cuda:{device} allocated", pid, end, figures["allocated_mb"]))
                tracks.events.append(_counter(f"cuda:{device} reserved", pid, end, figures["reserved_mb"]))
                tracks.events.append(_counter(f"cuda:{device} peak", pid, start, figures["peak_mb"]))
        tracks.files += 1
    tracks.events.sort(key=lambda e: (e["pid"], e["ts"]))
    return tracks


def earliest_us(files: list[MemoryFile]) -> float | None:
    """The earliest step start (epoch microseconds) of the files that carry step times."""
    starts = [
        s.end_us - (s.wall_ms or 0.0) * 1000 for f in files for s in f.steps if s.end_us is not None
    ]  # fmt: skip
    return min(starts) if starts else None


def memory_counter_tracks(
    files: list[MemoryFile],
    origin_ns: int,
    groups: dict[tuple[Any, ...], int],
    traced_groups: int,
    step_ends: dict[tuple[Any, ...], dict[int, tuple[float, float]]],
    names: dict[int, str],
) -> CounterTracks:
    """The memory figures' counter events; a process with no torch trace gets its own pid and name."""
    pid_of = {}
    for file in files:
        key = group_key(file)
        pid_of[key] = PID_BLOCK * (groups[key] + 1)
        if groups[key] >= traced_groups:
            names.setdefault(pid_of[key], process_label(file))
    counters = counter_events(files, origin_ns / 1000, pid_of, step_ends)
    placed = {e["pid"] for e in counters.events}
    for key, pid in pid_of.items():
        if groups[key] >= traced_groups and pid not in placed:
            names.pop(pid, None)
    return counters
