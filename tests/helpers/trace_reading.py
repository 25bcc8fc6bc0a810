"""Reading torch traces in tests."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path


def load_trace(path: Path) -> dict:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt") as handle:
        return json.load(handle)


def marker_steps(trace: dict, prefix: str) -> set[int]:
    """Step numbers of events named `<prefix><n>`."""
    pattern = re.compile(re.escape(prefix) + r"(\d+)$")
    return {int(m.group(1)) for e in trace["traceEvents"] if (m := pattern.match(str(e.get("name", ""))))}


def range_steps(trace_path: Path, label: str) -> set[int]:
    """The steps of the ranges `<label> [step <n>]` in a torch trace."""
    pattern = re.compile(re.escape(label) + r" \[step (\d+)\]$")
    return {int(m.group(1)) for e in load_trace(trace_path)["traceEvents"] if (m := pattern.match(str(e.get("name"))))}


def traces_under(directory: Path) -> list[Path]:
    return sorted(p for p in directory.rglob("*.pt.trace.json*") if not p.name.startswith("."))


def event_threads(trace: dict, prefix: str) -> set[int]:
    """Threads of the events whose names start with `prefix`."""
    return {e["tid"] for e in trace["traceEvents"] if str(e.get("name", "")).startswith(prefix)}
