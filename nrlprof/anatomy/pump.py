"""Reading Ray's task events as the job goes: successive GCS reads turned into lines of `tasks.jsonl`.

Every read returns all the GCS holds, so reads are spaced by how fast the GCS fills: the next one comes
when a quarter of its capacity has arrived since the last (the oldest are evicted first), at least a
second and at most a minute apart.  At the end, Ray's workers send their last events within a second:
they are waited for (a settle time, at most a limit) until no call is left unfinished.

Calls the GCS let go before a read saw them (the reads were too far apart, or the reader got no CPU) are counted:
before each read the GCS is asked how many tasks of the job it has had (`gcs_count`), and what it had that the
reads never saw was lost; the count and the time since the read before go to `gaps.jsonl`, and the tools say
which steps lack calls, and how many.  Where the GCS cannot be asked, a read that finds it full while it no
longer holds any call recorded before writes the same line without a count: calls may have been lost.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from nrlprof.anatomy.events import TaskEventReader
from nrlprof.anatomy.files import GAPS_FILE, TASKS_FILE, append_lines

MIN_INTERVAL_S = 1.0
MAX_INTERVAL_S = 60.0
CAPACITY_SHARE = 0.25
DEFAULT_GCS_CAPACITY = 100_000
FINAL_SETTLE_S = 1.5
FINAL_LIMIT_S = 10.0


class TaskEventPump:
    def __init__(
        self,
        job_id: bytes,
        run_dir: Path,
        capacity: int,
        fetch: Callable[[], list[bytes]],
        count_tasks: Callable[[], int] | None = None,
    ) -> None:
        self.reader = TaskEventReader(job_id)
        self.tasks_path = run_dir / TASKS_FILE
        self.gaps_path = run_dir / GAPS_FILE
        self.capacity = capacity
        self.fetch = fetch
        self.count_tasks = count_tasks  # the job's tasks the GCS has had, held or let go (`gcs_count`)
        self.lost = 0
        self.counted = False  # whether the GCS ever answered: `lost` is a count, not just 0
        self.interval_s = MIN_INTERVAL_S
        self.reads = 0
        self.read_s = 0.0
        self.read_cpu_s = 0.0
        self._last_read = 0.0
        self._last_read_ns = 0
        self.gaps = 0

    def read(self, final: bool = False) -> int:
        """Append the calls finished since the last read; returns how many."""
        began, cpu_began = time.perf_counter(), time.thread_time()
        fetched_ns = time.time_ns()
        had = self._count_tasks()  # before the fetch: a task it counts, the fetch holds or the GCS let go
        held = self.fetch()
        records = self.reader.read(held, final)
        append_lines(self.tasks_path, records)
        gap = {"since_ns": self._last_read_ns, "at_ns": fetched_ns, "held": len(held)}
        if had is not None:
            lost = max(self.lost, had - self.reader.tasks_seen)
            if lost > self.lost:
                self.gaps += 1
                append_lines(self.gaps_path, [{**gap, "lost": lost - self.lost}])
                self.lost = lost
        elif len(held) >= self.capacity and not self.reader.kept_recorded:
            self.gaps += 1
            append_lines(self.gaps_path, [gap])
        self._last_read_ns = fetched_ns
        now = time.perf_counter()
        self.reads += 1
        self.read_s += now - began
        self.read_cpu_s += time.thread_time() - cpu_began
        self.interval_s = self._next_interval(self.reader.fresh, now - self._last_read if self._last_read else None)
        self._last_read = now
        return len(records)

    @property
    def lost_counted(self) -> int | None:
        """The calls lost, where the GCS ever gave its count; None where it never did (then `lost` says nothing)."""
        return self.lost if self.counted else None

    def _count_tasks(self) -> int | None:
        """The GCS's count, or None where it cannot be asked (then never asked again: a read must not wait)."""
        if self.count_tasks is None:
            return None
        try:
            had = self.count_tasks()
        except Exception:
            self.count_tasks = None
            return None
        self.counted = True
        return had

    def _next_interval(self, fresh: int, elapsed_s: float | None) -> float:
        """Seconds until a quarter of the GCS's capacity has arrived at the rate seen since the last read."""
        if elapsed_s is None or fresh <= 0:
            return MIN_INTERVAL_S if elapsed_s is None else min(MAX_INTERVAL_S, 2 * self.interval_s)
        rate = fresh / elapsed_s
        return min(MAX_INTERVAL_S, max(MIN_INTERVAL_S, CAPACITY_SHARE * self.capacity / rate))

    def final_reads(self) -> None:
        """Read until the last calls have arrived: quiet twice in a row after the settle time, or the limit."""
        self.read()
        began = time.monotonic()
        quiet = False
        while time.monotonic() - began < FINAL_LIMIT_S:
            time.sleep(0.5)
            new = self.read()
            settled = time.monotonic() - began >= FINAL_SETTLE_S
            if settled and quiet and new == 0 and self.reader.pending == 0:
                return
            quiet = new == 0
        # Calls whose end never reached the GCS (an owner gone first) are kept with the span their worker sent.
        self.read(final=True)
