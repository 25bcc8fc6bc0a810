"""The largest live allocations at an allocator snapshot's peak, read without torch.

A snapshot (`torch.cuda.memory._dump_snapshot`) holds the allocator's state at the dump (`segments` and
their `blocks`) and its recent history per device (`device_traces`: alloc, free_requested, free_completed...).
The state at the peak is found as pytorch.org/memory_viz finds it: undo the history from the final state
back to its first entry, then replay it forward, keeping the moment the allocated total was highest.
"""

from __future__ import annotations

import io
import pickle
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MB = 1 << 20
MAX_SNAPSHOT_BYTES = 4 << 30
_FREES = ("free_requested", "free_completed")
# torch.cuda._memory_viz._profile_to_snapshot names a Python frame `file.py(12): function`
_PROFILE_FRAME = re.compile(r"^(?P<file>.+\.py)\((?P<line>\d+)\): (?P<function>.+)$")
# layout.memory_file_name with `.pickle`: <worker>[.rank<r>].steps<a>[-<b>].<pid>.pickle, or ...oom.<pid>.pickle
_SNAPSHOT_NAME = re.compile(
    r"^(?P<worker>.+?)(?:\.rank(?P<rank>\d+))?\.(?P<label>steps\d+(?:-\d+)?|oom)\.(?P<pid>\d+)\.pickle$"
)


@dataclass(frozen=True)
class SnapshotName:
    worker: str
    rank: int | None
    label: str  # `steps3-4` or `oom`
    pid: int


def parse_snapshot_name(name: str) -> SnapshotName | None:
    """The parts of an allocator snapshot's file name (`memory_file_name` with `.pickle`); None for another name."""
    match = _SNAPSHOT_NAME.match(name)
    if match is None:
        return None
    rank = match["rank"]
    return SnapshotName(match["worker"], None if rank is None else int(rank), match["label"], int(match["pid"]))


class _PlainUnpickler(pickle.Unpickler):
    """Builtin containers and scalars only: a snapshot holds nothing else, and no code runs while reading."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"refused {module}.{name}: a memory snapshot holds only plain data")


def load_snapshot(path: Path) -> dict[str, Any]:
    """The snapshot dict; ValueError with the reason when the file is not one."""
    try:
        size = path.stat().st_size
        if size > MAX_SNAPSHOT_BYTES:
            raise ValueError(f"{size} bytes, more than this reader takes ({MAX_SNAPSHOT_BYTES})")
        with open(path, "rb") as handle:
            data = _PlainUnpickler(io.BufferedReader(handle, 1 << 20)).load()
    except (OSError, pickle.UnpicklingError, EOFError, ValueError, TypeError, IndexError, RecursionError) as exc:
        raise ValueError(f"not an allocator snapshot ({type(exc).__name__}: {exc})") from exc
    if not isinstance(data, dict) or not isinstance(data.get("segments"), list):
        raise ValueError("not an allocator snapshot: expected a dict with `segments` (torch's _dump_snapshot)")
    return data


def _live_at_end(segments: list[Any]) -> dict[int, dict[int, tuple[int, list]]]:
    """device -> address -> (size, frames) of the blocks in use when the snapshot was taken."""
    live: dict[int, dict[int, tuple[int, list]]] = {}
    for segment in segments:
        if not isinstance(segment, dict):
            continue
        device = segment.get("device", 0)
        address = segment.get("address")
        for block in segment.get("blocks") or []:
            if not isinstance(block, dict):
                continue
            size = block.get("size", 0)
            block_address = block.get("address", address)
            if block.get("state") == "active_allocated" and isinstance(block_address, int):
                frames = block.get("frames")
                if frames is None and block.get("history"):  # the format before torch 2.1
                    frames = block["history"][0].get("frames")
                live.setdefault(device, {})[block_address] = (size, frames or [])
            if isinstance(address, int) and isinstance(size, int):
                address += size
    return live


def _peak_state(live: dict[int, tuple[int, list]], trace: list[Any]) -> tuple[int, dict[int, tuple[int, list]]]:
    """(peak bytes, the allocations live then) over one device's history, given the live set at its end."""
    entries = [e for e in trace if isinstance(e, dict) and isinstance(e.get("addr"), int)]
    state = _rewound(live, entries)
    total = sum(size for size, _ in state.values())
    peak, peak_at = total, -1
    for index, entry in enumerate(entries):
        action = entry.get("action")
        if action == "alloc":
            previous = state.get(entry["addr"])
            total += entry.get("size", 0) - (previous[0] if previous else 0)
            state[entry["addr"]] = (entry.get("size", 0), entry.get("frames") or [])
            if total > peak:
                peak, peak_at = total, index
        elif action in _FREES and entry["addr"] in state:
            total -= state.pop(entry["addr"])[0]
    if peak_at == len(entries) - 1:
        return peak, state
    return peak, _rewound(live, entries[peak_at + 1 :])


def _rewound(live: dict[int, tuple[int, list]], entries: list[dict]) -> dict[int, tuple[int, list]]:
    """The allocations live before `entries`, given those live after them."""
    state = dict(live)
    for entry in reversed(entries):
        action = entry.get("action")
        if action == "alloc":
            state.pop(entry["addr"], None)
        elif action in _FREES and entry["addr"] not in state:
            state[entry["addr"]] = (entry.get("size", 0), entry.get("frames") or [])
    return state


def frame_text(frame: Any) -> str:
    if not isinstance(frame, dict):
        return "?"
    return f"{frame.get('filename', '?')}:{frame.get('line', '?')}:{frame.get('name', '?')}"


def _located(frame: dict) -> dict:
    """A frame as the allocator records it; one from a profile (`filename` "none") gets its place from its name."""
    if frame.get("filename") == "none" and isinstance(frame.get("name"), str):
        match = _PROFILE_FRAME.match(frame["name"])
        if match:
            return {"filename": match["file"], "line": int(match["line"]), "name": match["function"]}
    return frame


def python_frames(frames: list[Any]) -> list[dict]:
    """The Python frames of a stack, innermost first (C++ frames are there when history recorded them)."""
    located = (_located(f) for f in frames if isinstance(f, dict))
    return [f for f in located if str(f.get("filename", "")).endswith(".py")]


def _own_frame(frames: list[dict]) -> dict | None:
    """The innermost Python frame outside torch itself: the line of the job's code that made the allocation."""
    for frame in frames:
        filename = str(frame.get("filename", ""))
        if "/torch/" not in filename and not filename.startswith("torch/"):
            return frame
    return frames[0] if frames else None


def snapshot_top_allocations(path: Path, top: int = 10) -> list[dict]:
    """The `top` largest allocations live at each device's peak, largest first.

    Each: device, size_mb, peak_mb (the device's allocated total at its peak), frame (the innermost Python
    frame outside torch, `file:line:function`, or `<no frames>`), stack (up to 6 Python frames, innermost first).
    ValueError when the file is not an allocator snapshot.
    """
    data = load_snapshot(Path(path))
    live = _live_at_end(data["segments"])
    traces = data.get("device_traces")
    traces = traces if isinstance(traces, list) else []
    rows = []
    for device in sorted(set(live) | {d for d, t in enumerate(traces) if t}):
        trace = traces[device] if device < len(traces) and isinstance(traces[device], list) else []
        peak, state = _peak_state(live.get(device, {}), trace)
        for size, frames in state.values():
            stack = python_frames(frames)
            own = _own_frame(stack)
            rows.append(
                {
                    "device": device,
                    "size_mb": round(size / MB, 3),
                    "peak_mb": round(peak / MB, 3),
                    "frame": frame_text(own) if own else "<no frames>",
                    "stack": [frame_text(f) for f in stack[:6]],
                }
            )
    rows.sort(key=lambda r: (-r["size_mb"], r["device"], r["frame"]))
    return rows[:top]
