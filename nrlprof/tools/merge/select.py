"""Which part of a run a merged timeline holds: worker patterns, ranks, steps (`merge --workers/--ranks/--steps`).

A trace is taken when its worker matches a pattern, its rank is listed (a trace with no rank, the controller's,
is kept: ranks choose among a worker's processes) and its window holds a chosen step. With steps chosen, only the
events of those steps stay: those whose span meets a chosen `ProfilerStep#<n>`'s, with the metadata and the
events that have no time; the steps' spans are read in a first pass over the trace.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nrlprof.layout import PROFILER_STEP_PREFIX, step_number
from nrlprof.tools.read.traces import TraceHeader, is_number, iter_event_batches

Spans = tuple[tuple[float, float], ...]  # (start, end) in the trace's own time


@dataclass(frozen=True)
class Selection:
    workers: tuple[str, ...] = ()  # fnmatch patterns; none: every worker
    ranks: frozenset[int] | None = None
    steps: tuple[tuple[int, int], ...] | None = None  # inclusive (first, last) runs of steps

    @property
    def everything(self) -> bool:
        return not self.workers and self.ranks is None and self.steps is None

    def keeps_process(self, worker: str, rank: int | None) -> bool:
        """Whether a process's other tracks (memory counters) are in the timeline."""
        if self.workers and not any(fnmatch.fnmatchcase(worker, p) for p in self.workers):
            return False
        return self.ranks is None or rank is None or rank in self.ranks

    def has_step(self, step: int) -> bool:
        return self.steps is None or any(first <= step <= last for first, last in self.steps)

    def keeps(self, header: TraceHeader) -> bool:
        """Whether the trace is in the timeline (its events may still be cut to the chosen steps)."""
        if not self.keeps_process(header.worker, header.rank):
            return False
        return not header.steps or any(map(self.has_step, header.steps))

    def share(self, header: TraceHeader) -> float:
        """The part of a kept trace that stays: its chosen steps over its steps (1 when none are chosen)."""
        if self.steps is None or not header.steps:
            return 1.0
        return sum(map(self.has_step, header.steps)) / len(header.steps)

    def chosen(self, header: TraceHeader) -> list[int] | None:
        """The steps of the trace to cut its events to; None to keep them all."""
        if self.steps is None or not header.steps or all(map(self.has_step, header.steps)):
            return None
        return [step for step in header.steps if self.has_step(step)]


EVERYTHING = Selection()


def _fields(event: Any) -> tuple[Any, Any, Any]:
    if isinstance(event, dict):
        return event.get("name"), event.get("ts"), event.get("dur")
    return event.name, event.ts, event.dur


def step_spans(path: Path, steps: Iterable[int]) -> Spans:
    """The spans of the `ProfilerStep#<n>` of `steps` in the trace (a first pass over its events)."""
    from nrlprof.tools.read.trace_events import decode_events  # msgspec: only for a merge that cuts steps

    wanted = set(steps)
    spans = []
    for batch in iter_event_batches(path, None, decode_events):
        for event in batch:
            name, ts, dur = _fields(event)
            if name.__class__ is not str or not name.startswith(PROFILER_STEP_PREFIX):
                continue
            if is_number(ts) and is_number(dur) and step_number(name, PROFILER_STEP_PREFIX) in wanted:
                spans.append((float(ts), float(ts) + float(dur)))
    return tuple(sorted(spans))


def in_spans(events: list[dict[str, Any]], spans: Spans) -> list[dict[str, Any]]:
    """The events that meet a span, the metadata, and those with no time."""
    kept = []
    for event in events:
        ts = event.get("ts")
        if event.get("ph") == "M" or not is_number(ts):
            kept.append(event)
            continue
        dur = event.get("dur")
        end = ts + dur if is_number(dur) and dur > 0 else ts
        if any(start <= end and ts <= stop for start, stop in spans):
            kept.append(event)
    return kept
