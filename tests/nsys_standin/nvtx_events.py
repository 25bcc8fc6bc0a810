"""Read the NVTX events the injection library appends and pair them into ranges, incrementally."""

from __future__ import annotations

import json
import os
from pathlib import Path


class NvtxCollector:
    """Pairs push/pop per (pid, thread, domain) and start/end per (pid, range id) across capture ranges."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.offsets: dict[str, int] = {}
        self.stacks: dict[tuple, list[dict]] = {}
        self.open_starts: dict[tuple, dict] = {}
        self.finished: list[dict] = []
        self.marks: list[dict] = []
        self.domains: list[dict] = []

    def poll(self) -> None:
        if not self.directory.is_dir():
            return
        for entry in sorted(os.scandir(self.directory), key=lambda e: e.name):
            if entry.name.endswith(".jsonl"):
                self._read_new_lines(entry.path)

    def _read_new_lines(self, path: str) -> None:
        with open(path, "rb") as handle:
            handle.seek(self.offsets.get(path, 0))
            data = handle.read()
        complete = data.rfind(b"\n") + 1
        self.offsets[path] = self.offsets.get(path, 0) + complete
        for line in data[:complete].splitlines():
            if line.strip():
                self._take(json.loads(line))

    def _take(self, event: dict) -> None:
        kind, pid, tid, domain = event["ev"], event["pid"], event["tid"], event["domain"]
        if kind == "domain":
            self.domains.append({"name": domain, "pid": pid, "t": event["t"]})
        elif kind == "mark":
            self.marks.append({"domain": domain, "message": event["msg"], "t": event["t"], "pid": pid, "tid": tid})
        elif kind == "push":
            self.stacks.setdefault((pid, tid, domain), []).append(self._range(event, "push_pop"))
        elif kind == "pop":
            stack = self.stacks.get((pid, tid, domain))
            if stack:
                self._finish(stack.pop(), event)
        elif kind == "start":
            self.open_starts[(pid, event["id"])] = self._range(event, "start_end")
        elif kind == "end":
            opened = self.open_starts.pop((pid, event["id"]), None)
            if opened is not None:
                self._finish(opened, event)

    @staticmethod
    def _range(event: dict, kind: str) -> dict:
        return {"domain": event["domain"], "message": event["msg"], "kind": kind, "start_ns": event["t"],
                "end_ns": None, "pid": event["pid"], "tid": event["tid"], "end_tid": None}  # fmt: skip

    def _finish(self, opened: dict, event: dict) -> None:
        self.finished.append({**opened, "end_ns": event["t"], "end_tid": event["tid"]})

    def take(self, start_ns: int, stop_ns: int) -> dict:
        """What a capture from start_ns to stop_ns saw: ranges begun inside it (end_ns None if still open at
        stop), marks inside it, and the domains created before its stop. Older events are dropped."""
        self.poll()
        still_open = [r for stack in self.stacks.values() for r in stack] + list(self.open_starts.values())
        ranges = []
        for item in [*self.finished, *still_open]:
            if start_ns <= item["start_ns"] <= stop_ns:
                ended = item["end_ns"] is not None and item["end_ns"] <= stop_ns
                ranges.append(item if ended else {**item, "end_ns": None, "end_tid": None})
        ranges.sort(key=lambda r: r["start_ns"])
        marks = [m for m in self.marks if start_ns <= m["t"] <= stop_ns]
        domains = [d for d in self.domains if d["t"] <= stop_ns]
        self.finished = [r for r in self.finished if r["start_ns"] > stop_ns]
        self.marks = [m for m in self.marks if m["t"] > stop_ns]
        return {"nvtx_ranges": ranges, "nvtx_marks": marks, "nvtx_domains": domains}
