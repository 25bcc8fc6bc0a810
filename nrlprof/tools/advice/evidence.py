"""What `explain` reasons from: the summary's figures, the step anatomy's facts, and where each lies on disk."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from nrlprof.layout import CONTROLLER
from nrlprof.tools.advice.finding import Finding, Look
from nrlprof.tools.advice.step_facts import NS_PER_MS, StepFacts
from nrlprof.tools.figures.model import Summary, WorkerSummary


@dataclass
class Evidence:
    summary: Summary
    facts: StepFacts | None
    chosen: set[int] | None = None  # the steps asked for (--steps); None: every step
    cannot_tell: list[str] = field(default_factory=list)

    def wanted(self, step: int) -> bool:
        return self.chosen is None or step in self.chosen

    @property
    def traced_workers(self) -> list[WorkerSummary]:
        return [w for w in self.summary.workers if not (w.worker == CONTROLLER and w.rank is None)]

    def per_worker(
        self, rule: Callable[[Evidence, str, list[WorkerSummary]], Finding | None], ranked: bool = False
    ) -> list[Finding]:
        """`rule`'s findings, per worker kind (by name) and its traced entries (only those with a rank, if `ranked`)."""
        kinds: dict[str, list[WorkerSummary]] = {}
        for entry in self.traced_workers:
            if not ranked or entry.rank is not None:
                kinds.setdefault(entry.worker, []).append(entry)
        findings = (rule(self, worker, ranks) for worker, ranks in sorted(kinds.items()))
        return [finding for finding in findings if finding is not None]

    def trace_of(self, worker: str, rank: int | None, step: int | None) -> WorkerSummary | None:
        """The trace (or capture) entry of this worker rank that holds `step`, if any was read."""
        for entry in self.traced_workers:
            mine = entry.worker == worker and (rank is None or entry.rank == rank)
            if mine and (step is None or step in entry.step_wall_ms):
                return entry
        return None

    def file_of(self, entry: WorkerSummary, step: int) -> str:
        """The file of `entry` whose steps hold `step` (an entry combines every window's file)."""
        spans = [s for s in entry.steps if s.label == str(step)]
        if len(entry.files) > 1 and spans:
            from nrlprof.layout import parse_trace_name

            for path in entry.files:
                name = parse_trace_name(Path(path).name)
                if name is not None and step in window_steps(name.window):
                    return str(path)
        return str(entry.files[0]) if entry.files else ""

    def look_at_phase(self, row: int, window: int) -> Look:
        """The phase row's time range in its step: in the worker's trace where one holds the step, else the
        step anatomy (`nrlprof merge` draws it)."""
        assert self.facts is not None
        tables = self.facts.tables
        phases = tables.phases
        worker = tables.calls.workers[phases.worker[row]]
        step = int(tables.steps[window])
        begin = int(tables.begins[window])
        start, end = int(phases.start[row]), int(phases.end[row])
        entry = self.trace_of(worker, int(phases.last_rank[row]), step) or self.trace_of(worker, None, step)
        where = self.file_of(entry, step) if entry is not None else f"{tables.calls.run} (nrlprof merge draws it)"
        return Look(where, step, (start - begin) / NS_PER_MS, (end - begin) / NS_PER_MS, start, end)

    def look_at_step(self, entry: WorkerSummary, step: int) -> Look:
        span = next((s for s in entry.steps if s.label == str(step)), None)
        if span is None:
            return Look(self.file_of(entry, step), step)
        return Look(self.file_of(entry, step), step, 0.0, (span.end_us - span.start_us) / 1000,
                    int(span.start_us * 1000), int(span.end_us * 1000))  # fmt: skip


def window_steps(window: str) -> set[int]:
    """The steps of a window's label (`3-4`, `2_5-6`); none for a label that names no steps."""
    steps: set[int] = set()
    for part in window.split("_"):
        first, _, last = part.partition("-")
        if first.isdigit() and (not last or last.isdigit()) and int(last or first) - int(first) < 100_000:
            steps.update(range(int(first), int(last or first) + 1))
    return steps
